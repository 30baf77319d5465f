package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// PartitionTable is a silo's GET /v1/partitions answer.
type PartitionTable struct {
	// Silo is the silo's cluster member id.
	Silo string `json:"silo"`
	// SiloID is the silo id, 16 hex digits.
	SiloID string `json:"silo_id"`
	// OwnedHere lists the partitions this silo leads.
	OwnedHere  []int          `json:"owned_here"`
	Partitions []PartitionRow `json:"partitions"`
}

// PartitionRow is one partition of a PartitionTable.
type PartitionRow struct {
	Partition int `json:"partition"`
	// Replica is this silo's own replica's view of the group, nil when the silo holds none.
	Replica *ReplicaView    `json:"replica"`
	Status  json.RawMessage `json:"status"`
	Error   string          `json:"error"`
}

// ReplicaView is what a silo's replica of a partition knows of its Raft group.
type ReplicaView struct {
	// LeaderSilo is the silo id of the leader it knows, nil when it knows none.
	LeaderSilo   *string    `json:"leader_silo"`
	Term         jsonUint64 `json:"term"`
	Voters       []string   `json:"voters"`
	Learners     []string   `json:"learners"`
	AppliedIndex jsonUint64 `json:"applied_index"`
	// CommitIndex is the highest log index this replica knows committed.
	CommitIndex jsonUint64 `json:"commit_index"`
	Leads       bool       `json:"leads"`
	// Consistency is the replica's last checksum of its state at a consistency check.
	Consistency struct {
		CheckedIndex jsonUint64 `json:"checked_index"`
		Checksum     *string    `json:"checksum"`
	} `json:"consistency"`
}

// jsonUint64 reads a JSON number or a decimal string (protojson renders 64-bit integers as
// strings).
type jsonUint64 uint64

// UnmarshalJSON accepts 12 and "12".
func (v *jsonUint64) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = 0
		return nil
	}
	if len(b) > 1 && b[0] == '"' {
		b = b[1 : len(b)-1]
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not an unsigned integer: %s", b)
	}
	*v = jsonUint64(n)
	return nil
}

// ReadPartitions reads GET /v1/partitions from the admin endpoint at address (host:port).
func ReadPartitions(ctx context.Context, address string) (*PartitionTable, error) {
	return readAdmin[PartitionTable](ctx, address, "/v1/partitions")
}

// CheckTable is a silo's POST /v1/partitions/check answer: every partition leader's verdict on a
// consistency check run for it.
type CheckTable struct {
	Consistent bool `json:"consistent"`
	Partitions []struct {
		Partition int `json:"partition"`
		Check     *struct {
			Index      jsonUint64 `json:"index"`
			Consistent bool       `json:"consistent"`
			Checksums  []struct {
				Silo     string `json:"silo"`
				Checksum string `json:"checksum"`
			} `json:"checksums"`
			Divergent []string `json:"divergent"`
			Missing   []string `json:"missing"`
		} `json:"check"`
		Error *string `json:"error"`
	} `json:"partitions"`
}

// CheckPartitions runs POST /v1/partitions/check on the admin endpoint at address.
func CheckPartitions(ctx context.Context, address string) (*CheckTable, error) {
	return callAdmin[CheckTable](ctx, http.MethodPost, address, "/v1/partitions/check")
}

// readAdmin GETs path from the admin endpoint at address and decodes its JSON answer into a T;
// an answer other than 200 is an error quoting the body.
func readAdmin[T any](ctx context.Context, address, path string) (*T, error) {
	return callAdmin[T](ctx, http.MethodGet, address, path)
}

// callAdmin sends method path (no body) to the admin endpoint at address and decodes its JSON
// answer into a T; an answer other than 200 is an error quoting the body.
func callAdmin[T any](ctx context.Context, method, address, path string) (*T, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+address+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s%s: %s: %s", method, address, path, resp.Status, body)
	}
	var out T
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("%s %s%s: %w", method, address, path, err)
	}
	return &out, nil
}

// SiloTable is a silo's GET /v1/silos answer: the silos it knows.
type SiloTable struct {
	// SiloID is the answering silo's id, 16 hex digits.
	SiloID string    `json:"silo_id"`
	Silos  []SiloRow `json:"silos"`
}

// SiloRow is one silo of a SiloTable.
type SiloRow struct {
	// SiloID is the silo's id, 16 hex digits.
	SiloID string `json:"silo_id"`
	// Alive is whether the answering silo's membership lists the silo live.
	Alive bool `json:"alive"`
	// Self is whether the row is the answering silo's own.
	Self bool `json:"self"`
	// Retired is whether the answering silo knows the silo retired.
	Retired bool `json:"retired"`
	// Build is what the silo announces of its binary (zone rules, cron evaluator version), and
	// BuildDiffers whether it differs from the answering silo's.
	Build        *string `json:"build"`
	BuildDiffers bool    `json:"build_differs"`
}

// ReadSilos reads GET /v1/silos from the admin endpoint at address (host:port).
func ReadSilos(ctx context.Context, address string) (*SiloTable, error) {
	return readAdmin[SiloTable](ctx, address, "/v1/silos")
}

// ReadMetric reads GET /metrics from the admin endpoint at address and returns the value of
// the sample of series name whose labels include every label of match ("key": "value"), and
// whether there is one.
func ReadMetric(ctx context.Context, address, name string, match map[string]string) (float64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET %s/metrics: %s: %s", address, resp.Status, body)
	}
	for _, line := range strings.Split(string(body), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		metric, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		if metric != name {
			continue
		}
		matched := true
		for k, v := range match {
			if !strings.Contains(","+labels+",", ","+k+`="`+v+`",`) {
				matched = false
			}
		}
		if !matched {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, false, fmt.Errorf("GET %s/metrics: %s: %w", address, line, err)
		}
		return f, true, nil
	}
	return 0, false, nil
}
