// Package nudge wakes a local launcher early. A launcher listens on a
// loopback UDP port and hands its address to the wrappers it starts
// (WHIMBREL_LAUNCHER_NUDGE); a wrapper that readies dependents sends one
// datagram, and the launcher polls at once instead of at its next tick.
// A lost nudge costs only latency: the launcher still polls on its
// interval.
package nudge

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Env names the variable that carries the listener's address.
const Env = "WHIMBREL_LAUNCHER_NUDGE"

// Listener receives nudges until Close.
type Listener struct {
	conn *net.UDPConn
	c    chan struct{}
	done chan struct{}

	mu      sync.Mutex
	onClose []func()
}

// Listen opens a listener on a free loopback port.
func Listen() (*Listener, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("listen for nudges: %w", err)
	}
	l := &Listener{conn: conn, c: make(chan struct{}, 1), done: make(chan struct{})}
	go l.read()
	return l, nil
}

// Addr is the address wrappers send to.
func (l *Listener) Addr() string { return l.conn.LocalAddr().String() }

// C receives a value after one or more nudges.
func (l *Listener) C() <-chan struct{} { return l.c }

func (l *Listener) read() {
	defer close(l.done)
	buf := make([]byte, 64)
	for {
		if _, _, err := l.conn.ReadFromUDP(buf); err != nil {
			return // closed
		}
		select {
		case l.c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// OnClose has Close call f first: f withdraws what was handed the
// listener's address (such as a file others read it from).
func (l *Listener) OnClose(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onClose = append(l.onClose, f)
}

// Close stops the listener and waits for its goroutine.
func (l *Listener) Close() error {
	l.mu.Lock()
	fs := l.onClose
	l.onClose = nil
	l.mu.Unlock()
	for _, f := range fs {
		f()
	}
	err := l.conn.Close()
	<-l.done
	return err
}

// Send nudges the listener at addr. It never blocks for long and never
// fails loudly: a nudge is a hint.
func Send(addr string) error {
	conn, err := net.DialTimeout("udp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte("nudge"))
	return err
}
