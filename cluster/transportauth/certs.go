package transportauth

import (
	"crypto"
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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultValidity is how long WriteDevelopment's certificates are valid.
const DefaultValidity = 365 * 24 * time.Hour

// Authority is a certificate authority that issues silo and client certificates (ECDSA P-256).
// It is for development and tests: its key lives in memory and in a file next to the CA.
type Authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	// CertPEM is the CA certificate, PEM-encoded (the --tls-ca file).
	CertPEM []byte
}

// Issued is a certificate and its private key, PEM-encoded.
type Issued struct {
	CertPEM, KeyPEM []byte
}

// TLS parses the pair.
func (i Issued) TLS() (tls.Certificate, error) { return tls.X509KeyPair(i.CertPEM, i.KeyPEM) }

// NewAuthority creates a self-signed CA named name, valid in [notBefore, notAfter].
func NewAuthority(name string, notBefore, notAfter time.Time) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// IssueSilo issues the certificate of silo name (URI SAN orrery:silo:<name>), valid in
// [notBefore, notAfter] for loopback and hosts (IP addresses or DNS names).
func (a *Authority) IssueSilo(name string, hosts []string, notBefore, notAfter time.Time) (Issued, error) {
	if name == "" {
		return Issued{}, fmt.Errorf("silo name is empty")
	}
	return a.issue("silo "+name, SiloURIPrefix+name, hosts, notBefore, notAfter)
}

// IssueClient issues the certificate of a client acting as principal (common name and URI SAN
// orrery:principal:<p>), valid in [notBefore, notAfter] for loopback and hosts. It issues
// system: principals too (tests of their refusal); no peer accepts them.
func (a *Authority) IssueClient(principal string, hosts []string, notBefore, notAfter time.Time) (Issued, error) {
	if principal == "" {
		return Issued{}, fmt.Errorf("principal is empty")
	}
	return a.issue(principal, PrincipalURIPrefix+principal, hosts, notBefore, notAfter)
}

func (a *Authority) issue(commonName, uri string, hosts []string, notBefore, notAfter time.Time) (Issued, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Issued{}, fmt.Errorf("URI SAN %q: %w", uri, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	template := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
		// Every node is a TLS server (it receives) and a TLS client (it sends).
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{u},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else if h != "" {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, a.cert, key.Public(), a.key)
	if err != nil {
		return Issued{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// KeyPEM is the CA's private key, PEM-encoded.
func (a *Authority) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// DevelopmentFiles are the files WriteDevelopment writes in dir.
func DevelopmentFiles(dir string) (ca, caKey string) {
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
}

// NodeFiles are the certificate and key files of a silo ("silo-<name>") or client
// ("client-<principal>") that WriteDevelopment writes in dir.
func NodeFiles(dir, node string) Files {
	ca, _ := DevelopmentFiles(dir)
	return Files{CA: ca, Cert: filepath.Join(dir, node+".pem"), Key: filepath.Join(dir, node+"-key.pem")}
}

// WriteDevelopment writes into dir (created if missing) a development CA (ca.pem, ca-key.pem)
// and, valid from now for validity, one certificate per silo (silo-<name>.pem and
// silo-<name>-key.pem) and per client principal (client-<p>.pem, client-<p>-key.pem), for
// loopback and hosts. Keys are written with mode 0600. It returns the paths written.
func WriteDevelopment(dir string, silos, clients, hosts []string, now time.Time, validity time.Duration) ([]string, error) {
	if validity <= 0 {
		validity = DefaultValidity
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(validity)
	ca, err := NewAuthority("orrery development CA", notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	caFile, caKeyFile := DevelopmentFiles(dir)
	var written []string
	write := func(path string, data []byte, mode os.FileMode) error {
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	if err := write(caFile, ca.CertPEM, 0o644); err != nil {
		return written, err
	}
	if err := write(caKeyFile, caKey, 0o600); err != nil {
		return written, err
	}
	node := func(name string, issue func() (Issued, error)) error {
		if strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("name %q: a file name cannot contain a path separator", name)
		}
		issued, err := issue()
		if err != nil {
			return err
		}
		f := NodeFiles(dir, name)
		if err := write(f.Cert, issued.CertPEM, 0o644); err != nil {
			return err
		}
		return write(f.Key, issued.KeyPEM, 0o600)
	}
	for _, s := range silos {
		if err := node("silo-"+s, func() (Issued, error) { return ca.IssueSilo(s, hosts, notBefore, notAfter) }); err != nil {
			return written, fmt.Errorf("silo %q: %w", s, err)
		}
	}
	for _, p := range clients {
		if strings.HasPrefix(p, SystemPrefix) {
			return written, fmt.Errorf("client %q: %s principals are Orrery's own, no peer accepts them", p, SystemPrefix)
		}
		if err := node("client-"+p, func() (Issued, error) { return ca.IssueClient(p, hosts, notBefore, notAfter) }); err != nil {
			return written, fmt.Errorf("client %q: %w", p, err)
		}
	}
	return written, nil
}
