// Package reliability holds the end-to-end reliability suite: real
// launchers, monitors and wrappers as separate processes on DynamoDB Local,
// under concurrency and kill -9. The size is WHIMBREL_RELIABILITY_SIZE
// activities (small by default, as CI runs it; the documented full size is
// 1000). It has no code of its own: all of it is tests (make reliability).
package reliability
