package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// IDFile is the name of the file, inside the data directory, that records
// the node id this data directory serves as.
const IDFile = "cluster-myid"

// ErrBadIDFile: the id file exists but does not hold a node id.
var ErrBadIDFile = errors.New("cluster: malformed " + IDFile)

// ValidID reports whether id is a node id: 40 lower-case hex digits.
func ValidID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// LoadID reads the node id recorded in dir. found is false when there is no
// id file; a file that does not hold a valid id is ErrBadIDFile.
func LoadID(dir string) (id string, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, IDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cluster: %w", err)
	}
	id = strings.TrimSpace(string(b))
	if !ValidID(id) {
		return "", false, fmt.Errorf("%w: %s", ErrBadIDFile, filepath.Join(dir, IDFile))
	}
	return id, true, nil
}

// SaveID records id in dir durably: it writes a temporary file, syncs it,
// renames it over IDFile and syncs the directory, so a crash leaves either
// the old id or the new one.
func SaveID(dir, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("cluster: invalid node id %q", id)
	}
	tmp, err := os.CreateTemp(dir, IDFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	name := tmp.Name()
	_, err = tmp.WriteString(id + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, filepath.Join(dir, IDFile))
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("cluster: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: the rename is already visible
		d.Close()
	}
	return nil
}

// PersistID makes dir record id and returns the id it recorded before
// ("" when none). A different previous id means this data directory used to
// serve another announced address: the caller should say so, because the
// keys on disk may belong to slots this node no longer owns.
func PersistID(dir, id string) (previous string, err error) {
	prev, found, err := LoadID(dir)
	if err != nil && !errors.Is(err, ErrBadIDFile) {
		return "", err
	}
	if found && prev == id {
		return prev, nil
	}
	return prev, SaveID(dir, id)
}
