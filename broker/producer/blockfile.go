package producer

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// BlockFileName is the name of FileBlockSource's file in the data directory.
const BlockFileName = "producer-id-block"

// DefaultBlockSize is the number of producer ids reserved at a time.
const DefaultBlockSize = 1000

// blockFileVersion is the version of the block file's one line:
// "<version> <end> <crc32c of "<version> <end>" in hex>\n". Never change it.
const blockFileVersion = 1

// FileBlockSource reserves producer id blocks for a single broker and
// persists the end of the last reserved block in BlockFileName in its
// directory, replaced atomically. It is safe for concurrent use, but only
// one process may use a directory (the data directory's lock sees to that).
type FileBlockSource struct {
	dir  string
	size int64

	mu struct {
		sync.Mutex
		end      int64 // first id not yet reserved
		poisoned error // sticky write or fsync failure
	}
}

// OpenFileBlockSource reads dir's block file, if any, and returns a source
// whose blocks of blockSize ids (DefaultBlockSize when <= 0) start past
// every block reserved before. A missing file means no block was ever
// reserved. A file that does not parse is ErrCorruptBlockFile: reusing ids
// would break every producer that holds one, so it is not papered over.
func OpenFileBlockSource(dir string, blockSize int64) (*FileBlockSource, error) {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	s := &FileBlockSource{dir: dir, size: blockSize}
	b, err := os.ReadFile(filepath.Join(dir, BlockFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("producer: read block file: %w", err)
	}
	end, err := parseBlockFile(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptBlockFile, filepath.Join(dir, BlockFileName), err)
	}
	s.mu.end = end
	return s, nil
}

// Reserve persists the end of a new block and returns the block. After a
// failed write or fsync it fails with ErrPoisoned until the process
// restarts, since what reached the disk is unknown.
func (s *FileBlockSource) Reserve() (Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.poisoned != nil {
		return Block{}, fmt.Errorf("%w: %v", ErrPoisoned, s.mu.poisoned)
	}
	start := s.mu.end
	if start > math.MaxInt64-s.size {
		return Block{}, ErrIDsExhausted
	}
	end := start + s.size
	if err := files.WriteFile(filepath.Join(s.dir, BlockFileName), formatBlockFile(end), 0o644); err != nil {
		s.mu.poisoned = err
		return Block{}, fmt.Errorf("producer: reserve producer id block: %w", err)
	}
	s.mu.end = end
	return Block{Start: start, End: end}, nil
}

func formatBlockFile(end int64) []byte {
	body := strconv.Itoa(blockFileVersion) + " " + strconv.FormatInt(end, 10)
	return []byte(fmt.Sprintf("%s %08x\n", body, crc32.Checksum([]byte(body), castagnoli)))
}

func parseBlockFile(b []byte) (int64, error) {
	line, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return 0, errors.New("no final newline")
	}
	fields := strings.Split(line, " ")
	if len(fields) != 3 {
		return 0, fmt.Errorf("%d fields, want 3", len(fields))
	}
	if fields[0] != strconv.Itoa(blockFileVersion) {
		return 0, fmt.Errorf("unknown version %q", fields[0])
	}
	body := fields[0] + " " + fields[1]
	if want := fmt.Sprintf("%08x", crc32.Checksum([]byte(body), castagnoli)); fields[2] != want {
		return 0, fmt.Errorf("crc %s, computed %s", fields[2], want)
	}
	end, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || end < 0 {
		return 0, fmt.Errorf("bad block end %q", fields[1])
	}
	return end, nil
}
