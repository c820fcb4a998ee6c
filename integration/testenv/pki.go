package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a throwaway certificate authority with a server certificate for
// 127.0.0.1 and "localhost" and a client certificate, as PEM files, for TLS
// tests of MariaDB and MinIO.
type PKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewPKI writes a fresh CA, server and client certificate (ECDSA P-256,
// valid for a day) into dir.
func NewPKI(dir string) (*PKI, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cdcsync test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	write := func(name, typ string, der []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP, certName, keyName string) (string, string, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return "", "", err
		}
		c, err := write(certName, "CERTIFICATE", der)
		if err != nil {
			return "", "", err
		}
		kp, err := write(keyName, "PRIVATE KEY", keyDER)
		return c, kp, err
	}
	p := &PKI{}
	if p.CA, err = write("ca.pem", "CERTIFICATE", caDER); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if p.ServerCert, p.ServerKey, err = leaf(2, "localhost", x509.ExtKeyUsageServerAuth, []string{"localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1)}, "server.pem", "server-key.pem"); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if p.ClientCert, p.ClientKey, err = leaf(3, "cdcsync", x509.ExtKeyUsageClientAuth, nil, nil, "client.pem", "client-key.pem"); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return p, nil
}

// MariaDBArgs are the mariadbd options that serve TLS with this PKI.
func (p *PKI) MariaDBArgs() []string {
	return []string{"--ssl-ca=" + p.CA, "--ssl-cert=" + p.ServerCert, "--ssl-key=" + p.ServerKey}
}

// ClientTLS is a TLS configuration that trusts the PKI's CA.
func (p *PKI) ClientTLS() (*tls.Config, error) {
	pemCA, err := os.ReadFile(p.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
