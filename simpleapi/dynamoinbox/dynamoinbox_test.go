package dynamoinbox_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/simpleapi/inboxtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

func TestConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness{New: func(t *testing.T) (state.Store, inbox.Inbox) {
		st := dynamotest.NewStore(t, dynamodb.Options{})
		return st, dynamoinbox.New(st)
	}})
}
