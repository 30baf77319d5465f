package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// defaultAdmin is --admin's default: a silo started with its default flags.
const defaultAdmin = "http://127.0.0.1:7380"

// adminFlag adds --admin to fs.
func adminFlag(fs *flag.FlagSet) *string {
	return fs.String("admin", defaultAdmin, "a silo's admin endpoint (URL or host:port)")
}

// adminGet reads path from the admin endpoint admin (a URL, or host:port for http), with
// --token as its bearer token, and returns the body of a 200 answer, and the URL it read.
func (c *command) adminGet(ctx context.Context, admin, path string) (body []byte, url string, err error) {
	return c.adminDo(ctx, http.MethodGet, admin, path)
}

// adminPost is adminGet with POST (and no request body).
func (c *command) adminPost(ctx context.Context, admin, path string) (body []byte, url string, err error) {
	return c.adminDo(ctx, http.MethodPost, admin, path)
}

func (c *command) adminDo(ctx context.Context, method, admin, path string) (body []byte, url string, err error) {
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	url = strings.TrimSuffix(admin, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, url, usagef("admin: %v", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, url, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, url, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, url, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(body))
	}
	return body, url, nil
}

// writeAdminJSON prints an admin endpoint's JSON document, indented.
func (c *command) writeAdminJSON(body []byte, url string) error {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("GET %s: not JSON: %w", url, err)
	}
	return writeJSON(c.stdout, doc)
}
