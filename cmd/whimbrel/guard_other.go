//go:build !linux

package main

// groupGuardMain: off Linux, whimbrel runs no activity, so it is never
// started as a guard.
func groupGuardMain() (int, bool) { return 0, false }
