package state

import (
	"encoding/json"
	"fmt"
)

// MapProgress is a for_each map's account of its elements, kept on the
// map's own item (the `map` attribute, docs/contract.md#for_each-maps) and
// changed only by compare-and-set: each change is one conditional write
// that names the account it replaces, so a step repeated, or taken by two
// participants at once, counts nothing twice.
//
// Elements are created in index order. Every element below Done is final
// (its last attempt ended and is not retried); Completed, Failed and
// Cancelled count those. Created elements exist (or are being written by a
// participant that may have died: whoever reaches a missing one below
// Created writes it). No element at or past Created exists.
type MapProgress struct {
	Items     int `json:"items"`   // the list's length
	Created   int `json:"created"` // elements 0..Created-1 are written
	Done      int `json:"done"`    // elements 0..Done-1 are final
	Completed int `json:"completed"`
	Failed    int `json:"failed"` // ended FAILED or TIMED_OUT, for good
	Cancelled int `json:"cancelled,omitempty"`
	// FirstFailed are the indexes of the first elements that failed,
	// for the map's reason.
	FirstFailed []int `json:"first_failed,omitempty"`
	// Window is the most elements created and not final at once: the
	// activity's max_running, or the default pace.
	Window int `json:"window"`
	// Tolerated is how many elements may fail with the map still
	// completing.
	Tolerated int `json:"tolerated"`
	// Stopped says more elements failed than tolerated: none is created
	// any more, and those not started are cancelled.
	Stopped bool `json:"stopped,omitempty"`
	// CarryFrom names the execution a redrive (whimbrel rerun
	// --from-failure) carries this map's completed elements from: each is
	// recorded COMPLETED, pointing at the old one, instead of run again.
	// On a map carried whole (Created 0), the elements are that
	// execution's.
	CarryFrom string `json:"carry_from,omitempty"`
}

// ParseMap reads a map's account; an empty one is an error.
func ParseMap(s string) (*MapProgress, error) {
	var m MapProgress
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("map account %q: %w", s, err)
	}
	if m.Items < 0 || m.Created < m.Done || m.Created > m.Items || m.Done < 0 {
		return nil, fmt.Errorf("map account %q does not add up", s)
	}
	return &m, nil
}

// Encode writes the account in its stored form.
func (m MapProgress) Encode() string {
	b, _ := json.Marshal(m) // a struct of numbers and a bool always encodes
	return string(b)
}

// ItemName is how an element of a map is shown: the activity's name and
// its index, as in convert[17].
func ItemName(activityName string, index int) string {
	return fmt.Sprintf("%s[%d]", activityName, index)
}

// MapOwner is the owner token of a map's item while it runs: no wrapper
// holds it, for its elements run instead, and every write that ends it
// is fenced by this token.
const MapOwner = "for_each"

// The environment of an element's command, beside the contract's own
// (contract.go): the element as JSON, and its index in the list.
const (
	EnvItem      = "WHIMBREL_ITEM"
	EnvItemIndex = "WHIMBREL_ITEM_INDEX"
)
