package silo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
)

// Principal is who the silo's own in-process client (the admin endpoint's reads, the bootstrap
// of grants) acts as: one of Orrery's own principals. The embedder's client (Silo.Client) acts
// as Config.ClientPrincipal instead.
const Principal = input.SystemPrincipalPrefix + "silo"

// bootstrapGrants are the grants a silo puts on every start: Config.Grants and, with
// InsecureDev, every capability on every namespace for client.DefaultPrincipal, the embedder's
// ClientPrincipal and Principal.
func (c Config) bootstrapGrants() []*orreryv1.PutGrant {
	puts := append([]*orreryv1.PutGrant(nil), c.Grants...)
	if c.InsecureDev {
		puts = append(puts, grants.Everything(client.DefaultPrincipal), grants.Everything(Principal))
		if c.ClientPrincipal != "" && c.ClientPrincipal != client.DefaultPrincipal {
			puts = append(puts, grants.Everything(c.ClientPrincipal))
		}
	}
	return puts
}

// putGrants fans the bootstrap grants out to every partition (client.PutGrant), as Principal.
// Putting the same grants again changes nothing, so every start does it.
func (s *Silo) putGrants(ctx context.Context) error {
	for _, put := range s.cfg.bootstrapGrants() {
		if err := s.client.PutGrant(ctx, put); err != nil {
			return fmt.Errorf("bootstrap the grant of %q: %w", put.GetPrincipal(), err)
		}
	}
	return nil
}

// putGrantsInBackground is putGrants for a silo that joined an existing cluster: the
// partitions it does not lead may not answer yet, so it retries until they do or the silo
// stops, without holding up the start.
func (s *Silo) putGrantsInBackground(ctx context.Context) {
	for wait := time.Second; ; wait = min(2*wait, time.Minute) {
		attempt, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout)
		err := s.putGrants(attempt)
		cancel()
		if err == nil {
			s.log.Info("grants bootstrapped", "grants", len(s.cfg.bootstrapGrants()))
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("bootstrap grants: retrying", "error", err, "after", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// grantFile is the JSON of a --grants-file: a list of grants, capabilities by name.
type grantFile []struct {
	Principal string `json:"principal"`
	Rules     []struct {
		Namespace    string   `json:"namespace"`
		Queue        string   `json:"queue"`
		Capabilities []string `json:"capabilities"`
		Fields       []struct {
			Path  string `json:"path"`
			Read  bool   `json:"read"`
			Write bool   `json:"write"`
			Use   bool   `json:"use"`
		} `json:"fields"`
	} `json:"rules"`
}

// ParseGrants decodes a grants file: a JSON list of {"principal", "rules": [{"namespace" ("*":
// every namespace), "queue" (optional), "capabilities": ["SchedulerManage", "SagaManage",
// "QueuePublish", "QueueConsume", "QueueInspect", "PolicyAdmin"], "fields": [{"path", "read",
// "write", "use"}]}]}. Each grant is validated as PutGrant is.
func ParseGrants(data []byte) ([]*orreryv1.PutGrant, error) {
	var file grantFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("grants: %w", err)
	}
	var puts []*orreryv1.PutGrant
	for i, g := range file {
		put := &orreryv1.PutGrant{Principal: g.Principal}
		for j, r := range g.Rules {
			rule := &orreryv1.GrantRule{Namespace: r.Namespace, Queue: r.Queue}
			for _, name := range r.Capabilities {
				c, ok := grants.Named(name)
				if !ok {
					return nil, fmt.Errorf("grants[%d].rules[%d].capabilities: unknown capability %q (known: %s)", i, j, name, grants.All)
				}
				rule.Capabilities |= uint64(c)
			}
			for _, f := range r.Fields {
				rule.Fields = append(rule.Fields, &orreryv1.FieldPolicy{Path: f.Path, Read: f.Read, Write: f.Write, Use: f.Use})
			}
			put.Rules = append(put.Rules, rule)
		}
		if err := grants.Validate(put); err != nil {
			return nil, fmt.Errorf("grants[%d]: %w", i, err)
		}
		puts = append(puts, put)
	}
	return puts, nil
}
