package wrapper

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// unmapBinaryPages drops this process's mappings of its own binary's
// read-only pages (code and constant data), once its start is over, and
// again after each heartbeat while it waits. The kernel maps 64 KB around
// each page of the binary a process touches (fault-around), so a wrapper
// that has started holds most of its binary resident, about 13 MB, though
// waiting and heartbeating use a small part of it. MADV_DONTNEED on those
// mappings only removes them from this process: the pages stay in the page
// cache, shared with every other process running the binary, and what the
// wrapper runs next is mapped back from there on its first touch, without
// reading the disk. Only mappings of the binary that are not writable and
// hold no private (anonymous) page are dropped, so nothing that differs
// from the file is ever discarded (a position-independent binary's
// relocated read-only data holds such pages and is kept). The mappings are
// found once: a mapping that is not writable never gains a private page,
// and the binary is not mapped again, so each later call is one madvise
// per mapping, without reading /proc.
func unmapBinaryPages() {
	binMappings.once.Do(func() { binMappings.m = readBinaryMappings() })
	for _, m := range binMappings.m {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED)
	}
}

// binMapping is a range of addresses of the binary's read-only pages.
type binMapping struct{ start, end uintptr }

// binMappings holds the binary's mappings that unmapBinaryPages drops.
var binMappings struct {
	once sync.Once
	m    []binMapping
}

// readBinaryMappings reads from /proc/self/smaps the mappings of this
// process's binary that are not writable and hold no private page.
func readBinaryMappings() []binMapping {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil
	}
	var drop []binMapping
	var cur *binMapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = nil
			path := strings.TrimSpace(strings.Join(f[5:], " "))
			if path != exe || len(f[1]) < 4 || f[1][1] == 'w' || f[1][3] != 'p' {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			drop = append(drop, binMapping{uintptr(start), uintptr(end)})
			cur = &drop[len(drop)-1]
			continue
		}
		// A private page that is swapped out counts under Swap, not
		// Anonymous: either holds what the file does not.
		if cur != nil && len(f) >= 2 && (f[0] == "Anonymous:" || f[0] == "Swap:") && f[1] != "0" {
			cur.end = cur.start // holds private pages: keep it
		}
	}
	keep := drop[:0]
	for _, m := range drop {
		if m.end > m.start {
			keep = append(keep, m)
		}
	}
	return keep
}
