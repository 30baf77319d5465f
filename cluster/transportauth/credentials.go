package transportauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/orreryhq/orrery"
)

// URI SAN prefixes naming a silo and a client principal.
const (
	SiloURIPrefix      = "orrery:silo:"
	PrincipalURIPrefix = "orrery:principal:"
)

// SystemPrefix starts the principals reserved to Orrery itself; no client certificate may name
// one.
const SystemPrefix = "system:"

// Files names the PEM files of a node's transport credentials. The zero value means no TLS.
type Files struct {
	// CA is the cluster CA certificate(s) that sign every silo and client certificate.
	CA string
	// Cert is this node's certificate (chain), Key its private key.
	Cert, Key string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Identity is who a certificate names: a silo (Silo set) or a client principal.
type Identity struct {
	Silo      string
	Principal string
}

// IsSilo reports whether the identity is a silo's.
func (id Identity) IsSilo() bool { return id.Silo != "" }

// String is "silo <name>" or "principal <p>".
func (id Identity) String() string {
	if id.IsSilo() {
		return "silo " + id.Silo
	}
	return "principal " + id.Principal
}

// IdentityOf returns who cert names (see the package doc), or an error for a certificate that
// names no silo and no principal, or a system: principal.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var principal string
	for _, u := range cert.URIs {
		s := u.String()
		if name, ok := strings.CutPrefix(s, SiloURIPrefix); ok && name != "" {
			return Identity{Silo: name}, nil
		}
		if p, ok := strings.CutPrefix(s, PrincipalURIPrefix); ok && principal == "" {
			principal = p
		}
	}
	if principal == "" {
		principal = cert.Subject.CommonName
	}
	switch {
	case principal == "":
		return Identity{}, fmt.Errorf("certificate %q names no silo (URI SAN %s<name>) and no principal (URI SAN %s<p> or common name)",
			cert.Subject, SiloURIPrefix, PrincipalURIPrefix)
	case strings.HasPrefix(principal, SystemPrefix):
		return Identity{}, fmt.Errorf("certificate %q names principal %q: %s principals are Orrery's own", cert.Subject, principal, SystemPrefix)
	}
	return Identity{Principal: principal}, nil
}

// Credentials are a node's loaded transport credentials: the CA pool, its certificate and the
// identity it names.
type Credentials struct {
	roots    *x509.CertPool
	cert     tls.Certificate
	identity Identity
	client   bool
	logger   *slog.Logger
}

// Load reads f. Every file is required; the certificate must be signed by the CA and name an
// identity (IdentityOf).
func Load(f Files) (*Credentials, error) {
	switch {
	case f.CA == "":
		return nil, orrery.Invalid("tls_ca", "the CA file is required with a certificate and key")
	case f.Cert == "":
		return nil, orrery.Invalid("tls_cert", "the certificate file is required with a CA and key")
	case f.Key == "":
		return nil, orrery.Invalid("tls_key", "the key file is required with a CA and certificate")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, orrery.Invalid("tls_ca", "read: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, orrery.Invalid("tls_cert", "load %s with key %s: %v", f.Cert, f.Key, err)
	}
	return New(caPEM, cert)
}

// New builds credentials from the CA certificates in caPEM and a node certificate.
func New(caPEM []byte, cert tls.Certificate) (*Credentials, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, orrery.Invalid("tls_ca", "no PEM certificate found")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, orrery.Invalid("tls_cert", "parse: %v", err)
	}
	cert.Leaf = leaf
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, orrery.Invalid("tls_cert", "%v", err)
	}
	// Signed by the CA; its validity period is the peers' to check (an expired certificate
	// is refused by every peer).
	if _, err := verifyAt(roots, cert.Certificate, leaf.NotBefore); err != nil {
		return nil, orrery.Invalid("tls_cert", "not signed by the CA: %v", err)
	}
	return &Credentials{roots: roots, cert: cert, identity: id, logger: slog.Default()}, nil
}

// Identity is who this node's certificate names.
func (c *Credentials) Identity() Identity { return c.identity }

// Leaf is this node's parsed certificate.
func (c *Credentials) Leaf() *x509.Certificate { return c.cert.Leaf }

// ForClient returns a copy whose dial credentials accept only silo certificates (a cluster
// client dials only silos).
func (c *Credentials) ForClient() *Credentials {
	cc := *c
	cc.client = true
	return &cc
}

// WithLogger returns a copy that logs the client streams' dropped message types to logger.
func (c *Credentials) WithLogger(logger *slog.Logger) *Credentials {
	cc := *c
	cc.logger = logger
	return &cc
}

// ServerOptions are the gRPC server options of the actor transport: TLS 1.3 requiring a client
// certificate of the CA that names an identity, and the interceptors of the package doc.
func (c *Credentials) ServerOptions() []grpc.ServerOption {
	g := newGuard(c.logger)
	return []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(c.serverConfig())),
		grpc.StreamInterceptor(g.intercept),
		RefuseUnary(),
	}
}

// serverConfig is the TLS configuration of the transport's server.
func (c *Credentials) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.roots,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			_, err := IdentityOf(cs.PeerCertificates[0])
			return err
		},
	}
}

// DialOption is the gRPC dial option of the actor transport: TLS 1.3 presenting this node's
// certificate and verifying the server's against the CA (not its host name, see the package
// doc); for a client, the server must be a silo.
func (c *Credentials) DialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(c.dialConfig()))
}

// dialConfig is the TLS configuration of the transport's dialer.
func (c *Credentials) dialConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		// The chain is verified in VerifyConnection, without the host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			var raw [][]byte
			for _, cert := range cs.PeerCertificates {
				raw = append(raw, cert.Raw)
			}
			leaf, err := verify(c.roots, raw)
			if err != nil {
				return err
			}
			id, err := IdentityOf(leaf)
			if err != nil {
				return err
			}
			if c.client && !id.IsSilo() {
				return fmt.Errorf("server certificate names %s, not a silo", id)
			}
			return nil
		},
	}
}

// verify checks a DER chain (leaf first) against roots now, for both client and server use.
func verify(roots *x509.CertPool, chain [][]byte) (*x509.Certificate, error) {
	return verifyAt(roots, chain, time.Time{})
}

// verifyAt checks a DER chain against roots at an instant (zero: now).
func verifyAt(roots *x509.CertPool, chain [][]byte, at time.Time) (*x509.Certificate, error) {
	if len(chain) == 0 {
		return nil, errors.New("no certificate")
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		certs[i] = cert
	}
	intermediates := x509.NewCertPool()
	for _, cert := range certs[1:] {
		intermediates.AddCert(cert)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}
