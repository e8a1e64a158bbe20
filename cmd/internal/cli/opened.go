package cli

import (
	"io"

	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Store is what a command gets from Open: the state, the Simple Lambda
// API's items, the means to install its tables, and Close, which a command
// calls when it is done.
type Store interface {
	state.Store
	inbox.Inbox
	state.Installer
	io.Closer
}

// Dynamo is an opened DynamoDB store, with the Simple Lambda API's inbox
// kept in its tables.
type Dynamo struct {
	*dynamodb.Store
	*dynamoinbox.Inbox
}
