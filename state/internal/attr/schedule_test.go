package attr

import (
	"strconv"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// A token item expires by TTL, TokenRetention after it was counted.
func TestTokenExpires(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m := EncodeToken("s", "up::1", at)
	want := N(strconv.FormatInt(at.Add(state.TokenRetention).Unix(), 10))
	if got := m[ExpiresAt]; got != want {
		t.Errorf("expires_at = %v, want %v", got, want)
	}
}
