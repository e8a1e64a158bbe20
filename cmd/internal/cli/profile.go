package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// ProfileEnv names a file that receives a CPU profile of the whole run
// of a command, for `go tool pprof` (tools/benchreport profiles
// whimbrel run and whimbrel-launcher with it). A %p in it is replaced by
// the process's ID, so that the wrappers a launcher starts, which inherit
// the variable, each write their own. Unset: no profile.
const ProfileEnv = "WHIMBREL_CPUPROFILE"

// startProfile starts the CPU profile ProfileEnv asks for and returns
// what stops it. A profile that cannot be written is said on stderr and
// the command runs without it.
func startProfile() func() {
	path := os.Getenv(ProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: no CPU profile: %v\n", ProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
