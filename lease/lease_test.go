package lease

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory; fail makes its calls fail (an outage);
// lostReply makes the next swap land but report failure (a timeout after
// the catalog applied the commit).
type memStore struct {
	mu        sync.Mutex
	rec       Record
	version   int
	fail      error
	lostReply bool
}

func (s *memStore) Load(context.Context) (Record, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Record{}, "", s.fail
	}
	if s.version == 0 {
		return Record{}, "", nil
	}
	return s.rec, strconv.Itoa(s.version), nil
}

func (s *memStore) Swap(_ context.Context, version string, rec Record) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return "", s.fail
	}
	cur := ""
	if s.version > 0 {
		cur = strconv.Itoa(s.version)
	}
	if version != cur {
		return "", ErrContended
	}
	s.version++
	s.rec = rec
	if s.lostReply {
		s.lostReply = false
		return "", errOutage
	}
	return strconv.Itoa(s.version), nil
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

var errOutage = errors.New("catalog unreachable")

func opts(self Holder, ttl time.Duration) Options {
	return Options{Pipeline: "shop-prod", TTL: ttl, Wait: true, Self: self,
		Transient: func(err error) bool { return errors.Is(err, errOutage) }}
}

// other is a holder on another machine: only its renewals tell whether it
// runs.
func other(name string) Holder {
	h := Self()
	h.Host, h.Machine, h.Instance = name, "", name
	return h
}

func TestAcquireFreshAndTokensGrow(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	a, err := Acquire(ctx, s, opts(other("a"), 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if a.Token() != 1 || a.Fence {
		t.Fatalf("first holder: token %d fence %v, want 1 false", a.Token(), a.Fence)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(ctx, s, opts(other("b"), 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() != 2 || b.Fence || b.Previous.Holder.Instance != "a" {
		t.Fatalf("after a release: token %d fence %v previous %q, want 2 false a", b.Token(), b.Fence, b.Previous.Holder.Instance)
	}
}

func TestSecondDaemonExitsWithTheHolderWhenNotWaiting(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	if _, err := Acquire(ctx, s, opts(other("host-a"), 3*time.Second)); err != nil {
		t.Fatal(err)
	}
	o := opts(other("host-b"), 3*time.Second)
	o.Wait = false
	_, err := Acquire(ctx, s, o)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("got %v, want a HeldError", err)
	}
	for _, want := range []string{"pipeline shop-prod is held by host-a pid", "lease token 1", "lease.wait is false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestStandbyTakesOverAtOnceWhenReleased(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	ttl := 30 * time.Second // far longer than the test: only the release can let b in
	a, err := Acquire(ctx, s, opts(other("a"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	var waited []Record
	var mu sync.Mutex
	o := opts(other("b"), ttl)
	o.Waiting = func(r Record) { mu.Lock(); waited = append(waited, r); mu.Unlock() }
	got := make(chan *Lease)
	go func() {
		b, err := Acquire(ctx, s, o)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("the standby took a lease that is held and renewed")
	default:
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if d := time.Since(released); d > 3*time.Second {
		t.Errorf("takeover took %s after the release", d)
	}
	if b.Token() != 2 || b.Fence {
		t.Errorf("token %d fence %v, want 2 false", b.Token(), b.Fence)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waited) != 2 || waited[0].Holder.Instance != "a" || waited[1].Holder.Instance != "" {
		t.Errorf("Waiting calls %+v, want the holder then a zero record", waited)
	}
}

func TestStandbyTakesOverAfterTTLAndFences(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	ttl := 3 * time.Second
	a, err := Acquire(ctx, s, opts(other("a"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	// a never renews: it is paused.
	start := time.Now()
	b, err := Acquire(ctx, s, opts(other("b"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < ttl {
		t.Errorf("took over after %s, before the TTL %s", d, ttl)
	}
	if b.Token() != 2 || !b.Fence {
		t.Errorf("token %d fence %v, want 2 true", b.Token(), b.Fence)
	}
	// a wakes up: it may no longer commit, and its renewal says who won.
	if err := a.Valid(); !errors.Is(err, ErrLost) {
		t.Errorf("Valid after the TTL: %v, want ErrLost", err)
	}
	err = a.renew(ctx)
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "b pid") {
		t.Errorf("renewal of the old holder: %v, want ErrLost naming b", err)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("release of the old holder: %v, want ErrLost", err)
	}
}

func TestRenewalsKeepTheStandbyWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &memStore{}
	ttl := 3 * time.Second
	a, err := Acquire(ctx, s, opts(other("a"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(ctx) }()
	bctx, bcancel := context.WithTimeout(ctx, 2*ttl)
	defer bcancel()
	if _, err := Acquire(bctx, s, opts(other("b"), ttl)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("standby against a renewing holder: %v, want it still waiting after 2 TTLs", err)
	}
	if err := a.Valid(); err != nil {
		t.Errorf("the renewing holder: %v", err)
	}
	cancel()
	if err := <-kept; !errors.Is(err, context.Canceled) {
		t.Errorf("Keep returned %v", err)
	}
}

func TestHolderGivesUpWhenItCannotRenew(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	ttl := 3 * time.Second
	a, err := Acquire(ctx, s, opts(other("a"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	s.setFail(errOutage)
	start := time.Now()
	err = a.Keep(ctx)
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "catalog unreachable") {
		t.Fatalf("Keep during an outage: %v, want ErrLost with the cause", err)
	}
	if d := time.Since(start); d > ttl {
		t.Errorf("gave up after %s, later than the TTL %s: a standby may have taken over", d, ttl)
	}
	// The outage ends and nobody took over: the same daemon holds it again
	// with the same token and no fence.
	s.setFail(nil)
	again, err := Acquire(ctx, s, opts(a.opts.Self, ttl))
	if err != nil {
		t.Fatal(err)
	}
	if again.Token() != 1 || again.Fence {
		t.Errorf("re-acquired with token %d fence %v, want 1 false", again.Token(), again.Fence)
	}
}

func TestStandbyWaitsOutAnOutage(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	ttl := 3 * time.Second
	a, err := Acquire(ctx, s, opts(other("a"), ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := Acquire(ctx, s, opts(other("b"), ttl)); got <- err }()
	time.Sleep(300 * time.Millisecond)
	s.setFail(errOutage)
	time.Sleep(500 * time.Millisecond)
	s.setFail(nil)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("standby after an outage: %v", err)
	}
	// An error before the store ever answered is a setup problem.
	s.setFail(errOutage)
	if _, err := Acquire(ctx, s, opts(other("c"), ttl)); !errors.Is(err, errOutage) {
		t.Errorf("first load failing: %v, want the error", err)
	}
}

func TestHolderOfThisMachineThatIsGone(t *testing.T) {
	self := Self()
	if self.Machine == "" {
		t.Skip("no /proc here: a dead holder cannot be told from a live one, so a standby waits the TTL")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := self
	dead.PID, dead.Instance, dead.ProcStart = cmd.Process.Pid, "dead", 12345
	if !dead.gone(self) {
		t.Errorf("a holder whose pid %d has exited is not gone", dead.PID)
	}
	alive := self
	alive.PID = os.Getppid()
	alive.ProcStart, _ = procStart(alive.PID)
	alive.Instance = "parent"
	if alive.gone(self) {
		t.Error("the running parent process counts as gone")
	}
	reused := alive
	reused.ProcStart++
	if !reused.gone(self) {
		t.Error("a holder whose pid now belongs to another process is not gone")
	}
	restarted := self
	restarted.Instance = "before"
	if !restarted.gone(self) {
		t.Error("an earlier process with this process's pid (a restarted container) is not gone")
	}
	elsewhere := dead
	elsewhere.Machine = "another"
	if elsewhere.gone(self) {
		t.Error("a holder on another machine counts as gone")
	}

	// A standby takes the lease of a gone holder at once, without fencing.
	s := &memStore{}
	if _, err := s.Swap(context.Background(), "", Record{Holder: dead, Token: 4}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := Acquire(context.Background(), s, opts(self, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Second || l.Token() != 5 || l.Fence {
		t.Errorf("after %s: token %d fence %v, want at once, 5, false", time.Since(start), l.Token(), l.Fence)
	}
}

func TestContendedAcquireHasOneWinner(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	const n = 8
	var wg sync.WaitGroup
	tokens := make(chan int64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts(other("d"+strconv.Itoa(i)), time.Minute)
			o.Wait = false
			if l, err := Acquire(ctx, s, o); err == nil {
				tokens <- l.Token()
			}
		}()
	}
	wg.Wait()
	close(tokens)
	var won []int64
	for tok := range tokens {
		won = append(won, tok)
	}
	if len(won) != 1 || won[0] != 1 {
		t.Errorf("winners' tokens %v, want exactly one with token 1", won)
	}
}

// A renewal that landed although its caller saw it fail (a timeout) is not
// mistaken for another daemon's takeover: the next renewal goes on.
func TestRenewalWhoseReplyWasLost(t *testing.T) {
	ctx := context.Background()
	s := &memStore{}
	a, err := Acquire(ctx, s, opts(other("a"), 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.lostReply = true
	s.mu.Unlock()
	if err := a.renew(ctx); !errors.Is(err, errOutage) {
		t.Fatalf("renewal with a lost reply: %v, want the error", err)
	}
	if err := a.renew(ctx); err != nil {
		t.Fatalf("the next renewal: %v, want it to go on from its own landed record", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}
