package persistence

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/orreryhq/orrery"
)

// ClusterMetaFile is the name of the data root's cluster metadata file.
const ClusterMetaFile = "cluster.json"

// clusterMeta is the content of cluster.json: what a data root was created with.
type clusterMeta struct {
	Partitions int    `json:"partitions"`
	Created    string `json:"created"`
}

// PartitionDir is the directory of partition n's store: <dataRoot>/partitions/<n>.
func PartitionDir(dataRoot string, n int) string {
	return filepath.Join(dataRoot, "partitions", strconv.Itoa(n))
}

// EnsureClusterMeta records the partition count in <dataRoot>/cluster.json the first time a
// silo starts on dataRoot, and checks it on every later start: the count is fixed when the
// data root is created, because it decides which partition holds every lane. A different
// count is a Validation error naming both figures.
//
// The file is published atomically and at most once: written to a temporary file, fsynced,
// hard-linked to its final name (which, unlike a rename, fails if another silo published
// first), and the directory fsynced. A silo that loses that race checks the winner's count.
func EnsureClusterMeta(dataRoot string, partitions int) error {
	if partitions < 1 {
		return orrery.Invalid("partitions", "must be at least 1, got %d", partitions)
	}
	path := filepath.Join(dataRoot, ClusterMetaFile)
	err := checkClusterMeta(path, partitions)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dataRoot, 0o750); err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "create data root %s", dataRoot)
	}
	content, err := json.MarshalIndent(clusterMeta{
		Partitions: partitions,
		Created:    time.Now().UTC().Format(time.RFC3339Nano),
	}, "", "  ")
	if err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "encode %s", path)
	}
	if err := publishOnce(path, append(content, '\n')); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return checkClusterMeta(path, partitions)
		}
		return orrery.Wrap(orrery.CodeUnavailable, err, "write %s", path)
	}
	return nil
}

// checkClusterMeta compares the stored count with partitions; a missing file is fs.ErrNotExist.
func checkClusterMeta(path string, partitions int) error {
	content, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "read %s", path)
	}
	var meta clusterMeta
	if err := json.Unmarshal(content, &meta); err != nil || meta.Partitions < 1 {
		return orrery.Errorf(orrery.CodeValidation,
			"%s is damaged (want {\"partitions\": N, ...}); restore it or point the silo at another data root", path)
	}
	if meta.Partitions != partitions {
		return orrery.Invalid("partitions",
			"the data root %s was created with %d partitions and the silo is configured with %d; "+
				"the count cannot change for an existing data root",
			filepath.Dir(path), meta.Partitions, partitions)
	}
	return nil
}

// publishOnce makes path hold content, durably, unless path already exists (fs.ErrExist).
func publishOnce(path string, content []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so a new entry in it survives power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}
