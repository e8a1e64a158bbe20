package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Extending the store. A package that keeps items of its own in the
// contract's tables (the Simple Lambda API's inbox and stream positions,
// in package simpleapi and below) reaches DynamoDB through the Store's
// client, so that its calls are bounded and their errors translated as the
// Store's own, and accounts for the capacity they consume.

// API returns the store's client: every call is bounded by the store's
// timeouts, and an endpoint that does not answer, a missing table or a
// missing configuration is reported as the Store reports it.
func (st *Store) API() API { return st.api }

// Table returns the name of a table, prefix included; base is its name
// without prefix (TableActivityEvent, ...).
func (st *Store) Table(base string) string { return st.prefix + base }

// Report records the capacity consumed by a call made through API, under
// the operation's name, as the Store records its own (Options.Capacity).
func (st *Store) Report(op string, cc ...types.ConsumedCapacity) { st.report(op, cc...) }

// ReturnCapacity is what a call made through API asks DynamoDB to return
// of the capacity it consumes, for Report.
func (st *Store) ReturnCapacity() types.ReturnConsumedCapacity { return st.returnCapacity() }
