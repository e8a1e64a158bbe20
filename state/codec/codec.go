// Package codec exports the item codec both backends share
// (state/internal/attr) to packages that keep items of their own in a
// store's tables through the backends' extension points: the Simple Lambda
// API's inbox (simpleapi/dynamoinbox, simpleapi/sqliteinbox). An Item is
// a table item in DynamoDB's data model; the backends convert it to their
// own form (state/dynamodb's ToAV, FromAV; state/sqlite keeps it as is).
package codec

import "github.com/whimbrel/whimbrel/state/internal/attr"

// The model of an item.
type (
	Item  = attr.Item  // an item: attribute name → value
	Value = attr.Value // one attribute's value
	S     = attr.S     // a String
	N     = attr.N     // a Number
	Bool  = attr.Bool  // a Boolean
	// Update is a set of attributes to write; Apply makes it on an item.
	Update = attr.Update
	// Reporter reports the items a read could not decode (each backend
	// has one, see their Undecoded); Skips collects those of a listing.
	Reporter = attr.Reporter
	Skips    = attr.Skips
	// Swap is a compare-and-set of one String attribute of an activity
	// item, made with an activity write (the backends'
	// UpdateActivityWith): the write fails unless Attr holds Old (or, with
	// Old empty, is absent), and sets it to New.
	Swap = attr.Swap
)

// The items of the contract's tables that are not the Store's: requests,
// events and registrations, and the outcome a processor records on a
// request or an event. A Decode names the table in its *state.DecodeError.
var (
	EncodeRequest      = attr.EncodeRequest
	DecodeRequest      = attr.DecodeRequest
	EncodeEvent        = attr.EncodeEvent
	DecodeEvent        = attr.DecodeEvent
	EncodeRegistration = attr.EncodeRegistration
	DecodeRegistration = attr.DecodeRegistration
	DecodeActivity     = attr.DecodeActivity
	OutcomeItem        = attr.OutcomeItem
	Epoch              = attr.Epoch
)
