package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/orreryhq/orrery/cluster/transportauth"
)

// runCerts runs silo certs: it writes a development CA and certificates for the actor
// transport's mutual TLS (transportauth.WriteDevelopment) and prints the files written and the
// flags that use them. For development and tests only: the CA key sits next to the CA.
func runCerts(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("silo certs", flag.ContinueOnError)
	var dir, silos, clients, hosts string
	var validity time.Duration
	fs.StringVar(&dir, "out", "./certs", "directory to write the CA, certificates and keys into")
	fs.StringVar(&silos, "silos", "", "comma-separated silo names, one certificate each (URI SAN orrery:silo:<name>)")
	fs.StringVar(&clients, "clients", "", "comma-separated client principals, one certificate each (common name and URI SAN orrery:principal:<p>)")
	fs.StringVar(&hosts, "hosts", "", "comma-separated extra IP addresses or DNS names of every certificate (loopback is always included)")
	fs.DurationVar(&validity, "valid-for", transportauth.DefaultValidity, "how long the certificates are valid")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	if silos == "" && clients == "" {
		return fmt.Errorf("silos, clients: name at least one silo or client")
	}
	written, err := transportauth.WriteDevelopment(dir, splitList(silos), splitList(clients), splitList(hosts), time.Now(), validity)
	for _, path := range written {
		fmt.Fprintln(out, path)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "silo certs: development certificates in %s, valid for %v; run a silo with --tls-ca %s --tls-cert %s --tls-key %s\n",
		dir, validity, written[0], transportauth.NodeFiles(dir, "silo-<name>").Cert, transportauth.NodeFiles(dir, "silo-<name>").Key)
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
