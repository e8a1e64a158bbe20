package main

import "github.com/whimbrel/whimbrel/process"

// groupGuardMain makes this process the guard of a --supervise inline
// launcher's commands when it was started as one.
func groupGuardMain() (int, bool) { return process.GroupGuardMain() }
