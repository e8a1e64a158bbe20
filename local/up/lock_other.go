//go:build !unix

package up

import (
	"errors"
	"os"
)

// tryLock cannot lock here: whimbrel up runs local activities, which need
// Linux, so no server holds the lock on this system.
func tryLock(*os.File, bool) (bool, error) {
	return false, errors.New("whimbrel up needs Linux")
}

func unlock(*os.File) {}
