package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// completionFlag is a flag as the completion scripts offer it.
type completionFlag struct {
	name    string
	usage   string
	bool    bool     // takes no value
	file    bool     // its value is a file (--config)
	choices []string // its values, when they are a fixed list
}

// completionFlags lists a command's flags, --help included.
func (c *command) completionFlags() []completionFlag {
	fs, _, _ := c.flagSet()
	var out []completionFlag
	fs.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		cf := completionFlag{name: f.Name, usage: usage, file: f.Name == "config"}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			cf.bool = true
		}
		if ch, ok := f.Value.(*choice); ok {
			cf.choices = ch.choices
		}
		out = append(out, cf)
	})
	return append(out, completionFlag{name: "help", usage: "show this help", bool: true})
}

// positional is what a command's positional arguments complete to.
func (c *command) positional() []string {
	switch c.name {
	case "completion":
		return []string{"bash", "zsh", "fish"}
	}
	return nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return append(names, "help")
}

// writeCompletion prints the completion script for shell.
func writeCompletion(w io.Writer, shell string) error {
	var s string
	switch shell {
	case "bash":
		s = bashCompletion()
	case "zsh":
		s = zshCompletion()
	case "fish":
		s = fishCompletion()
	default:
		return usageError("completion", "completion: unknown shell %q: use bash, zsh or fish", shell)
	}
	_, err := io.WriteString(w, s)
	return err
}

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(`# bash completion for cdcsync, printed by "cdcsync completion bash".
# Load it with: source <(cdcsync completion bash)
_cdcsync() {
	local cur prev cmd i
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev=""
	if [ "$COMP_CWORD" -gt 0 ]; then
		prev="${COMP_WORDS[COMP_CWORD-1]}"
	fi
	# --flag=value: bash splits it at "=" (COMP_WORDBREAKS)
	if [ "$cur" = "=" ]; then
		cur=""
	elif [ "$prev" = "=" ] && [ "$COMP_CWORD" -gt 1 ]; then
		prev="${COMP_WORDS[COMP_CWORD-2]}"
	fi
	cmd=""
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "${COMP_WORDS[i]}" in
		-*|=) ;;
		*)
			cmd="${COMP_WORDS[i]}"
			break
			;;
		esac
	done
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "`)
	b.WriteString(strings.Join(commandNames(), " "))
	b.WriteString(` --help --version" -- "$cur"))
		return
	fi
	case "$prev" in
	--config|-config)
		compopt -o filenames 2>/dev/null
		COMPREPLY=($(compgen -o plusdirs -f -X '!*.y*ml' -- "$cur"))
		return
		;;
`)
	// Flags with values: their values (per command: two commands may
	// offer different values for one flag name), or nothing to offer.
	var names []string
	choices := map[string][]string{} // flag name -> "cmd) COMPREPLY=..." lines
	seen := map[string]bool{"config": true}
	for _, c := range commands {
		for _, f := range c.completionFlags() {
			if f.bool || f.name == "config" {
				continue
			}
			if !seen[f.name] {
				seen[f.name] = true
				names = append(names, f.name)
			}
			if len(f.choices) > 0 {
				choices[f.name] = append(choices[f.name], fmt.Sprintf("\t\t%s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c.name, strings.Join(f.choices, " ")))
			}
		}
	}
	for _, name := range names {
		fmt.Fprintf(&b, "\t--%s|-%s)\n", name, name)
		if cs := choices[name]; len(cs) > 0 {
			b.WriteString("\t\tcase \"$cmd\" in\n")
			for _, c := range cs {
				b.WriteString(c)
			}
			b.WriteString("\t\tesac\n")
		}
		b.WriteString("\t\treturn\n\t\t;;\n")
	}
	b.WriteString("\tesac\n\tcase \"$cmd\" in\n")
	for _, c := range commands {
		var words []string
		for _, f := range c.completionFlags() {
			words = append(words, "--"+f.name)
		}
		fmt.Fprintf(&b, "\t%s)\n", c.name)
		if pos := c.positional(); len(pos) > 0 {
			fmt.Fprintf(&b, "\t\tif [[ \"$cur\" != -* ]]; then\n\t\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t\treturn\n\t\tfi\n", strings.Join(pos, " "))
		}
		fmt.Fprintf(&b, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t;;\n", strings.Join(words, " "))
	}
	fmt.Fprintf(&b, "\thelp)\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\t;;\n", strings.Join(commandNames(), " "))
	b.WriteString("\tesac\n}\ncomplete -F _cdcsync cdcsync\n")
	return b.String()
}

// zshQuote quotes s for a single-quoted zsh word.
func zshQuote(s string) string { return strings.ReplaceAll(s, "'", `'\''`) }

// zshDesc makes s safe inside an _arguments or _describe description.
func zshDesc(s string) string {
	s = strings.NewReplacer("[", "(", "]", ")", ":", " -", "`", "").Replace(s)
	if i := strings.Index(s, "; "); i > 0 {
		s = s[:i]
	}
	return zshQuote(s)
}

func zshCompletion() string {
	var b strings.Builder
	b.WriteString(`#compdef cdcsync
# zsh completion for cdcsync, printed by "cdcsync completion zsh".
# Install it with: cdcsync completion zsh > "${fpath[1]}/_cdcsync"
# (or load it in a running shell: source <(cdcsync completion zsh))

_cdcsync() {
	local curcontext="$curcontext" state line
	local -a commands
	commands=(
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "\t\t'%s:%s'\n", c.name, zshDesc(c.summary))
	}
	b.WriteString("\t\t'help:show the help of cdcsync or of a command'\n\t)\n")
	b.WriteString(`	_arguments -C \
		'(- *)--version[print the version]' \
		'(- *)'{-h,--help}'[show the help]' \
		'1:command:->command' \
		'*::argument:->argument'
	case $state in
	command)
		_describe -t commands 'cdcsync command' commands
		;;
	argument)
		case $words[1] in
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "\t\t%s)\n\t\t\t_arguments \\\n", c.name)
		for _, f := range c.completionFlags() {
			switch {
			case f.name == "help":
				b.WriteString("\t\t\t\t'(- *)'{-h,--help}'[show this help]' \\\n")
			case f.bool:
				fmt.Fprintf(&b, "\t\t\t\t'--%s[%s]' \\\n", f.name, zshDesc(f.usage))
			case f.file:
				fmt.Fprintf(&b, "\t\t\t\t'--%s=[%s]:file:_files -g \"*.(yaml|yml)\"' \\\n", f.name, zshDesc(f.usage))
			case len(f.choices) > 0:
				fmt.Fprintf(&b, "\t\t\t\t'--%s=[%s]:%s:(%s)' \\\n", f.name, zshDesc(f.usage), f.name, strings.Join(f.choices, " "))
			default:
				fmt.Fprintf(&b, "\t\t\t\t'--%s=[%s]:%s: ' \\\n", f.name, zshDesc(f.usage), f.name)
			}
		}
		switch {
		case len(c.positional()) > 0:
			fmt.Fprintf(&b, "\t\t\t\t'1:argument:(%s)'\n", strings.Join(c.positional(), " "))
		case c.args != "":
			fmt.Fprintf(&b, "\t\t\t\t'*:%s: '\n", zshDesc(c.args))
		default:
			b.WriteString("\t\t\t\t'*: :'\n")
		}
		b.WriteString("\t\t\t;;\n")
	}
	fmt.Fprintf(&b, "\t\thelp)\n\t\t\t_arguments '1:command:(%s)'\n\t\t\t;;\n", strings.Join(commandNames(), " "))
	b.WriteString(`		esac
		;;
	esac
}

if [ "$funcstack[1]" = "_cdcsync" ]; then
	_cdcsync "$@"
else
	compdef _cdcsync cdcsync
fi
`)
	return b.String()
}

// fishQuote quotes s as a single-quoted fish string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func fishCompletion() string {
	var b strings.Builder
	b.WriteString(`# fish completion for cdcsync, printed by "cdcsync completion fish".
# Install it with: cdcsync completion fish > ~/.config/fish/completions/cdcsync.fish
complete -c cdcsync -f
complete -c cdcsync -n __fish_use_subcommand -l version -d 'print the version'
complete -c cdcsync -n __fish_use_subcommand -s h -l help -d 'show the help'
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c cdcsync -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	b.WriteString("complete -c cdcsync -n __fish_use_subcommand -a help -d 'show the help of cdcsync or of a command'\n")
	fmt.Fprintf(&b, "complete -c cdcsync -n '__fish_seen_subcommand_from help' -a %s\n", fishQuote(strings.Join(commandNames(), " ")))
	for _, c := range commands {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.completionFlags() {
			fmt.Fprintf(&b, "complete -c cdcsync -n %s -l %s", cond, f.name)
			switch {
			case f.name == "help":
				b.WriteString(" -s h")
			case f.file:
				b.WriteString(" -r -F")
			case len(f.choices) > 0:
				fmt.Fprintf(&b, " -x -a %s", fishQuote(strings.Join(f.choices, " ")))
			case !f.bool:
				b.WriteString(" -x")
			}
			fmt.Fprintf(&b, " -d %s\n", fishQuote(firstClause(f.usage)))
		}
		if pos := c.positional(); len(pos) > 0 {
			fmt.Fprintf(&b, "complete -c cdcsync -n %s -a %s\n", cond, fishQuote(strings.Join(pos, " ")))
		}
	}
	return b.String()
}

// firstClause is s up to its first "; ".
func firstClause(s string) string {
	if i := strings.Index(s, "; "); i > 0 {
		return s[:i]
	}
	return s
}
