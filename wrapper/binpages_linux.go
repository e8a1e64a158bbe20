package wrapper

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// unmapBinaryPages drops this process's mappings of its own binary's
// read-only pages (code and constant data), once its start is over. The
// kernel maps 64 KB around each page of the binary a process touches
// (fault-around), so a wrapper that has started holds most of its binary
// resident, about 13 MB, though waiting and heartbeating use a small part
// of it. MADV_DONTNEED on those mappings only removes them from this
// process: the pages stay in the page cache, shared with every other
// process running the binary, and what the wrapper runs next is mapped
// back from there on its first touch, without reading the disk. Only
// mappings of the binary that are not writable and hold no private
// (anonymous) page are dropped, so nothing that differs from the file is
// ever discarded (a position-independent binary's relocated read-only data
// holds such pages and is kept).
func unmapBinaryPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	type mapping struct{ start, end uintptr }
	var drop []mapping
	var cur *mapping
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
			drop = append(drop, mapping{uintptr(start), uintptr(end)})
			cur = &drop[len(drop)-1]
			continue
		}
		// A private page that is swapped out counts under Swap, not
		// Anonymous: either holds what the file does not.
		if cur != nil && len(f) >= 2 && (f[0] == "Anonymous:" || f[0] == "Swap:") && f[1] != "0" {
			cur.end = cur.start // holds private pages: keep it
		}
	}
	for _, m := range drop {
		if m.end > m.start {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED)
		}
	}
}
