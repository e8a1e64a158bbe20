// Package clock is the time every participant reads for the contract:
// claim, state and end times, heartbeats, the monitor's staleness
// judgements, retry delays, start times. Tests run participants with
// clocks that disagree, as the hosts of a real fleet do: in binaries built
// with the whimbrel_fault tag, WHIMBREL_FAULT_CLOCK_OFFSET (a Go duration,
// such as -2.5s) moves this process's clock by that much. Release builds
// compile Now to time.Now.
package clock

// Env names the variable that offsets the clock in fault builds.
const Env = "WHIMBREL_FAULT_CLOCK_OFFSET"
