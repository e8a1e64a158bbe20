//go:build !unix

package sqlite

import (
	"fmt"
	"os"
)

// processGone reports false where a process's presence is not checked:
// a stale address costs a datagram to a closed port.
func processGone(int) bool { return false }

// openRegular opens path for reading if it is a regular file.
func openRegular(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return os.Open(path)
}
