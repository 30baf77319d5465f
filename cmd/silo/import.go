package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/silo"
)

// runImport runs silo import: it imports the old layout of the data root into its silo store
// (persistence.ImportPartitionStores) and prints what it did to out.
func runImport(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("silo import", flag.ContinueOnError)
	var dataDir string
	var partitions int
	fs.StringVar(&dataDir, "data", silo.DefaultDataDir, "data root holding the old layout (cluster.json, partitions/<n>/)")
	fs.IntVar(&partitions, "partitions", 0, "partition count the data root must have been created with (0: the one cluster.json records)")
	if err := parseFlags(fs, args, getenv); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	report, err := persistence.ImportPartitionStores(dataDir, partitions, persistence.Options{Logger: logger})
	if err != nil {
		return err
	}
	if report.Resumed {
		fmt.Fprintf(out, "silo import: %s: the store %s was complete; renamed the old layout to imported-cluster.json and imported-partitions/\n",
			dataDir, persistence.SiloStoreDir(dataDir))
		return nil
	}
	for _, p := range report.Partitions {
		fmt.Fprintf(out, "partition %d: %d keys, %d bytes, logged time %s\n", p.Partition, p.Keys, p.Bytes, loggedTime(p.LoggedTimeMicros))
	}
	fmt.Fprintf(out, "silo import: %s: imported %d partitions into %s; the old layout is kept as imported-cluster.json and imported-partitions/\n",
		dataDir, len(report.Partitions), persistence.SiloStoreDir(dataDir))
	return nil
}

// loggedTime renders a logged time in Unix microseconds, "none" for 0.
func loggedTime(micros int64) string {
	if micros == 0 {
		return "none"
	}
	return fmt.Sprintf("%s (%d µs)", time.UnixMicro(micros).UTC().Format(time.RFC3339Nano), micros)
}
