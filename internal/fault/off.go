//go:build !whimbrel_fault

package fault

// Point does nothing in release builds.
func Point(string) {}
