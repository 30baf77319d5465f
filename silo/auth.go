package silo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/silo/ui"
)

// AdminToken binds a bearer token of the admin endpoint to the principal its requests act as.
// Only the token's SHA-256 hash is kept.
type AdminToken struct {
	// SHA256 is the SHA-256 hash of the token's bytes.
	SHA256 [sha256.Size]byte
	// Principal is who a request bearing the token acts as: grants decide what it may do.
	Principal string
}

// NewAdminToken binds token, kept only as its hash, to principal.
func NewAdminToken(token, principal string) AdminToken {
	return AdminToken{SHA256: sha256.Sum256([]byte(token)), Principal: principal}
}

// adminTokenFile is the JSON of an --admin-tokens-file.
type adminTokenFile []struct {
	Principal string `json:"principal"`
	SHA256    string `json:"sha256"`
}

// ParseAdminTokens decodes an admin tokens file: a JSON list of {"principal", "sha256"}, where
// sha256 is the hex SHA-256 hash of the token's bytes (`printf %s "$TOKEN" | sha256sum`); the
// token itself is never stored. A principal may have several tokens; a hash may appear once,
// and Orrery's own principals (system:...) take none.
func ParseAdminTokens(data []byte) ([]AdminToken, error) {
	var file adminTokenFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("admin tokens: %w", err)
	}
	tokens := make([]AdminToken, len(file))
	for i, entry := range file {
		hash, err := hex.DecodeString(entry.SHA256)
		if err != nil || len(hash) != sha256.Size {
			return nil, fmt.Errorf("admin tokens[%d].sha256: must be %d hex digits (the SHA-256 of the token), got %d characters", i, 2*sha256.Size, len(entry.SHA256))
		}
		tokens[i] = AdminToken{Principal: entry.Principal}
		copy(tokens[i].SHA256[:], hash)
	}
	if err := validateAdminTokens(tokens); err != nil {
		return nil, err
	}
	return tokens, nil
}

// validateAdminTokens checks each token's principal and that no hash repeats.
func validateAdminTokens(tokens []AdminToken) error {
	seen := make(map[[sha256.Size]byte]bool, len(tokens))
	for i, token := range tokens {
		if err := input.Name("principal", token.Principal, input.MaxIDBytes); err != nil {
			return fmt.Errorf("admin tokens[%d]: %w", i, err)
		}
		if input.IsSystem(token.Principal) {
			return fmt.Errorf("admin tokens[%d].principal: %q is one of Orrery's own principals (%s...), which no token may act as", i, token.Principal, input.SystemPrincipalPrefix)
		}
		if seen[token.SHA256] {
			return fmt.Errorf("admin tokens[%d].sha256: the same token is listed twice", i)
		}
		seen[token.SHA256] = true
	}
	return nil
}

// credential is one credential a silo must be configured with unless Config.InsecureDev.
type credential struct {
	name string // in the ready line's security mode
	flag string // cmd/silo's flag that sets it
	set  bool
}

// credentials lists the silo's credentials and whether each is configured. The admin tokens
// are needed only while the admin endpoint is on; the TLS files are checked in full when the
// silo loads them (transportauth.Load).
func (c Config) credentials() []credential {
	return []credential{
		{"tokens", "--admin-tokens-file", len(c.AdminTokens) > 0 || c.Admin == "off"},
		{"gossip-key", "--gossip-key-file", len(c.GossipKey) > 0},
		{"mtls", "--tls-ca/--tls-cert/--tls-key", c.TLSCA != "" && c.TLSCert != "" && c.TLSKey != ""},
	}
}

// checkCredentials refuses a configuration missing any credential, naming each missing flag,
// unless InsecureDev.
func (c Config) checkCredentials() error {
	if c.InsecureDev {
		return nil
	}
	var missing []string
	for _, cred := range c.credentials() {
		if !cred.set {
			missing = append(missing, cred.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a silo without credentials does not start: missing %s (or run with --insecure-dev for development)", strings.Join(missing, ", "))
	}
	return nil
}

// securityMode is the ready line's security: INSECURE-DEV, or the configured credentials
// joined by "+" ("tokens+gossip-key+mtls").
func (c Config) securityMode() string {
	if c.InsecureDev {
		return "INSECURE-DEV"
	}
	var names []string
	for _, cred := range c.credentials() {
		if cred.set {
			names = append(names, cred.name)
		}
	}
	return strings.Join(names, "+")
}

// principalKey is the request context key of the admin request's authenticated principal.
type principalKey struct{}

// publicAdminRoute reports whether a request needs no token: the health and readiness probes
// and the web UI's static files (the UI's JSON calls carry the token entered in the page).
func publicAdminRoute(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/":
		return true
	}
	return strings.HasPrefix(r.URL.Path, ui.Prefix)
}

// authenticate requires "Authorization: Bearer <token>" of one of Config.AdminTokens on every
// route but the public ones (publicAdminRoute), /metrics included, and serves the request as
// the token's principal. In InsecureDev without AdminTokens a request without a token acts as
// client.DefaultPrincipal. A request that is refused gets 401 with a WWW-Authenticate challenge
// and a JSON error naming the problem. Every 401, and every 403 a handler answers, is a denial
// on the silo's audit logger (deniedReads).
func (s *Silo) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicAdminRoute(r) {
			next.ServeHTTP(w, r)
			return
		}
		principal, problem := s.adminPrincipal(r.Header.Get("Authorization"))
		if problem != "" {
			challenge := `Bearer realm="orrery"`
			if r.Header.Get("Authorization") != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			s.denied.record(denialAdmin, "", r.Method+" "+r.URL.Path, problem)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "UNAUTHENTICATED", "message": problem, "field": "authorization"}})
			return
		}
		recorder := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(recorder, r.WithContext(context.WithValue(r.Context(), principalKey{}, principal)))
		if recorder.status == http.StatusForbidden {
			s.denied.record(denialAdmin, principal, r.Method+" "+r.URL.Path, "403 Forbidden")
		}
	})
}

// adminPrincipal is the principal an Authorization header authenticates, or the problem with
// it. Every configured hash is compared, in constant time, whichever matches.
func (s *Silo) adminPrincipal(authorization string) (principal, problem string) {
	if authorization == "" {
		if s.cfg.InsecureDev && len(s.cfg.AdminTokens) == 0 {
			return client.DefaultPrincipal, ""
		}
		return "", "missing Authorization header: send Authorization: Bearer <token>"
	}
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", "the Authorization header is not a bearer token: send Authorization: Bearer <token>"
	}
	hash := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := -1
	for i := range s.cfg.AdminTokens {
		if subtle.ConstantTimeCompare(hash[:], s.cfg.AdminTokens[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", "the bearer token is not one of the silo's admin tokens"
	}
	return s.cfg.AdminTokens[found].Principal, ""
}

// adminClient is the silo's client acting as the admin request's authenticated principal.
func (s *Silo) adminClient(r *http.Request) *client.Client {
	principal, _ := r.Context().Value(principalKey{}).(string)
	if principal == "" {
		principal = client.DefaultPrincipal // authenticate sets one on every route that calls here
	}
	return s.client.As(principal)
}
