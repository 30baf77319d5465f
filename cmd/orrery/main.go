// Command orrery operates an Orrery cluster through the Go client (client.Dial): it lists,
// describes, creates, updates, pauses, resumes, triggers, deletes, exports and imports
// schedules (by id or by name), lists and
// describes sagas, shows a queue's depth, peeks at a lane's messages without leasing them,
// moves a lane's dead letters back to it, pauses and resumes a queue's consumption, sets its
// retry policy, enqueues a message (with a priority, unique by a key or its payload, if asked)
// and cancels one by id, puts, deletes, shows and lists exclusion calendars, shows the audit log (grant changes and denials, for a
// principal holding PolicyAdmin on "*"), and shows the partition and silo tables a silo's admin
// endpoint serves.
//
//	orrery [--seeds host:port,...] [--cluster name] [--gossip-key-file FILE] [--tls-ca F --tls-cert F --tls-key F] [--token TOKEN] [-o table|json] [--timeout 30s] [--log-level off] <command>
//
//	orrery schedules list --namespace NS [--queue Q] [--state active|paused|suspended|cancelled|completed] [--label K=V]... [--name-prefix P] [--max N] [--after TOKEN]
//	orrery help
//	orrery schedules describe NS QUEUE KEY ID|NAME [--generations]
//	orrery schedules create NAME --namespace NS --queue Q [--key K] (--cron EXPR [--tz ZONE] | --every DUR [--start TIME] | --at TIME | --after DUR) [--payload JSON] [--headers JSON] [--misfire P] [--overlap P] [--catch-up DUR] [--ttl DUR] [--max-deliveries N] [--priority 0..9]
//	orrery schedules update NAME --namespace NS --queue Q [--key K] [the flags of create to change]
//	orrery schedules pause|resume|trigger|delete|skip-expired NS QUEUE KEY ID|NAME
//	orrery schedules backfill --from TIME [--to TIME] NS QUEUE KEY ID|NAME
//	orrery schedules process-due --namespace NS (--partition N | --queue Q --key K) [--max N]
//	orrery schedules export --namespace NS [--queue Q] [--state S] > schedules.jsonl
//	orrery schedules import < schedules.jsonl
//	orrery sagas list --namespace NS [--queue Q] [--phase waiting|completed|cancelled|timed_out] [--label K=V]... [--max N] [--after TOKEN]
//	orrery sagas describe NS QUEUE KEY ID|NAME
//	orrery queues stats NS QUEUE [KEY]
//	orrery queues peek NS QUEUE KEY [-n N] [--after ID]      (QUEUE may be a dead-letter queue, QUEUE$dlq)
//	orrery queues redrive-dlq NS QUEUE KEY [--max N]
//	orrery queues pause NS QUEUE [--reason R]   (on every partition: receives lease nothing until resume)
//	orrery queues resume NS QUEUE
//	orrery messages enqueue NS QUEUE KEY [--id ID] [--payload JSON] [--headers JSON] [--ordering-key K] [--delay D] [--ttl D] [--max-deliveries N] [--priority 0..9] [--unique-key K | --unique-by-payload] [--unique-for D] [--retry-max-attempts N ...]
//	orrery queues retry-policy NS QUEUE [--max-attempts N] [--initial-backoff D] [--max-backoff D] [--jitter P] [--on-exhausted dead-letter|drop] | --remove   (on every partition)
//	orrery queues limit NS QUEUE --max-leased K --per-second R | --remove   (a cluster-wide cap)
//	orrery messages cancel NS QUEUE KEY ID [--reason R]
//	orrery calendars put NS NAME [--tz ZONE] [--date D]... [--range FROM..TO]... [--cron EXPR]... [--description TEXT]   (on every partition)
//	orrery calendars delete|get NS NAME
//	orrery calendars list NS [--max N] [--after NAME]
//	orrery audit [--since 24h] [--max N] [--after TOKEN]
//	orrery partitions [--admin http://127.0.0.1:7380]
//	orrery partitions check [--admin http://127.0.0.1:7380]  (exit 1 unless every partition is consistent)
//	orrery silos [--admin http://127.0.0.1:7380]
//	orrery lag [--namespace NS --queue Q] [--fail-over DUR]   (per partition: how late its due work and the queue's oldest message are)
//
// --gossip-key-file is the cluster's gossip key, for a cluster whose silos encrypt their gossip;
// --token (or ORRERY_TOKEN) is the bearer token partitions and silos send to the admin
// endpoint, whose principal the endpoint acts as.
//
// Every flag can also be set in the environment as ORRERY_<FLAG> (upper case, '-' as '_'; -o
// as ORRERY_OUTPUT); a flag on the command line wins. Output is a table by default and JSON
// with -o json (records as protobuf JSON with the proto field names). A command that fails
// prints one line to stderr naming what failed (the orrery.Error code and field when there is
// one) and exits non-zero: 2 for a usage error, 1 otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs one command line with the process environment and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(args, stdin, stdout, stderr, os.Getenv)
}

// usageError is a command line that cannot be run (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// runEnv is run with getenv as the environment.
func runEnv(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cmd := &command{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	err := cmd.run(args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "orrery:", err)
	var usage usageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}

// command is one invocation: its streams, environment and global flags.
type command struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	seeds       string
	clusterName string
	output      string
	timeout     time.Duration
	logLevel    string
	// tls are the --tls-ca, --tls-cert and --tls-key files (client.DialConfig's).
	tls struct{ ca, cert, key string }
	// token is the admin endpoint's bearer token (--token, ORRERY_TOKEN).
	token string
	// gossipKeyFile names the file of the cluster's gossip key (--gossip-key-file).
	gossipKeyFile string
}

// defaultSeeds is --seeds's default: a silo started with its default flags.
const defaultSeeds = "127.0.0.1:7382"

// run parses the global flags and runs the command they precede.
func (c *command) run(args []string) error {
	fs := c.flagSet("orrery")
	fs.StringVar(&c.seeds, "seeds", defaultSeeds, "comma-separated gossip addresses of silos")
	fs.StringVar(&c.clusterName, "cluster", "orrery", "cluster name")
	fs.StringVar(&c.output, "output", "table", "output format: table or json")
	fs.StringVar(&c.output, "o", "table", "output format: table or json (as --output)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "bound on the whole command")
	fs.StringVar(&c.tls.ca, "tls-ca", "", "PEM file of the cluster CA, for silos running mutual TLS (with --tls-cert and --tls-key)")
	fs.StringVar(&c.tls.cert, "tls-cert", "", "PEM file of this client's certificate; the commands act as the principal it names")
	fs.StringVar(&c.tls.key, "tls-key", "", "PEM file of this client's private key")
	fs.StringVar(&c.token, "token", "", "bearer token sent to the admin endpoint (partitions, silos)")
	fs.StringVar(&c.gossipKeyFile, "gossip-key-file", "", "file holding the cluster's gossip encryption key, hex or base64 (as the silos' --gossip-key-file)")
	fs.StringVar(&c.logLevel, "log-level", "off", "the client's and cluster layer's log lines to stderr: off, debug, info, warn or error")
	rest, err := c.parse(fs, args, true)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.stderr, usageText)
	}
	if err != nil {
		return err
	}
	if len(rest) > 0 && rest[0] == "help" {
		_, err := fmt.Fprint(c.stdout, usageText)
		return err
	}
	if c.output != "table" && c.output != "json" {
		return usagef("output: must be table or json, got %q", c.output)
	}
	if c.logLevel != "off" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
			return usagef("log-level: must be off, debug, info, warn or error, got %q", c.logLevel)
		}
	}
	if c.timeout <= 0 {
		return usagef("timeout: must be positive, got %v", c.timeout)
	}
	if len(rest) == 0 {
		return usagef("a command is required: schedules, sagas, queues, messages, calendars, audit, partitions or silos (orrery help lists them)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	switch rest[0] {
	case "schedules":
		return c.schedules(ctx, rest[1:])
	case "sagas":
		return c.sagas(ctx, rest[1:])
	case "queues":
		return c.queues(ctx, rest[1:])
	case "messages":
		return c.messages(ctx, rest[1:])
	case "calendars":
		return c.calendars(ctx, rest[1:])
	case "audit":
		return c.audit(ctx, rest[1:])
	case "partitions":
		return c.partitions(ctx, rest[1:])
	case "silos":
		return c.silos(ctx, rest[1:])
	case "lag":
		return c.lag(ctx, rest[1:])
	}
	return usagef("unknown command %q: want schedules, sagas, queues, messages, calendars, lag, audit, partitions, silos or help", rest[0])
}

// flagSet is an empty flag set named name that prints nothing while parsing: parse reports
// its errors in one line and prints the flags for -h.
func (c *command) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse sets fs's flags from ORRERY_<FLAG> environment variables (one-letter flags are aliases
// and read none), then parses args, so explicit flags override the environment. It returns
// the arguments after the flags, refused unless positional allows them.
func (c *command) parse(fs *flag.FlagSet, args []string, positional bool) ([]string, error) {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 || envErr != nil {
			return
		}
		name := "ORRERY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := c.getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = usagef("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(c.stderr, "Flags of %s:\n", fs.Name())
			fs.SetOutput(c.stderr)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	if !positional && fs.NArg() > 0 {
		return nil, usagef("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return fs.Args(), nil
}

// dial joins the cluster through --seeds as a client; its log lines (and the cluster layer's:
// memberlist, protoactor) go to stderr at --log-level, none by default, so they do not mix
// with the output (a failure is the error dial or the call returns).
func (c *command) dial(ctx context.Context) (*client.Client, error) {
	var seeds []string
	for _, s := range strings.Split(c.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return nil, usagef("seeds: at least one silo gossip address is required")
	}
	logger := slog.New(slog.DiscardHandler)
	if c.logLevel != "off" {
		var level slog.Level
		_ = level.UnmarshalText([]byte(c.logLevel)) // checked in run
		logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	}
	var gossipKey []byte
	if c.gossipKeyFile != "" {
		data, err := os.ReadFile(c.gossipKeyFile)
		if err != nil {
			return nil, usagef("gossip-key-file: %v", err)
		}
		if gossipKey, err = cluster.ParseSecretKey(data); err != nil {
			return nil, usagef("gossip-key-file %s: %v", c.gossipKeyFile, err)
		}
	}
	cl, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, ClusterName: c.clusterName, GossipKey: gossipKey,
		TLSCA: c.tls.ca, TLSCert: c.tls.cert, TLSKey: c.tls.key, Options: client.Options{Logger: logger}})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", strings.Join(seeds, ","), err)
	}
	return cl, nil
}
