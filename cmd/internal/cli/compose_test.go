package cli

import (
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/simpleapi"
)

// An opened store is a backend with the inbox beside it. Commands find
// what else it is by type assertion (schedule.Store) and hand it to the
// processor (simpleapi.Store): a method both halves had would be
// ambiguous and silently drop out, so the build checks the whole set.
var (
	_ Store           = (*Dynamo)(nil)
	_ schedule.Store  = (*Dynamo)(nil)
	_ simpleapi.Store = (*Dynamo)(nil)
)
