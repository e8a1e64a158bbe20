//go:build !linux

package wrapper

// unmapBinaryPages does nothing off Linux, where the wrapper does not run
// in production.
func unmapBinaryPages() {}
