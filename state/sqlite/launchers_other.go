//go:build !unix

package sqlite

// processGone reports false where a process's presence is not checked:
// a stale address costs a datagram to a closed port.
func processGone(int) bool { return false }
