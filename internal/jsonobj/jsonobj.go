// Package jsonobj splits a JSON object into its members without decoding
// their values: a large stored document (a workflow's item and its
// definition, 150 kB for 2,000 activities) is read for the few members a
// caller needs, in one pass, where encoding/json checks and skips the
// same bytes again at every level of nesting.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrNotObject is the error of Members for what is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// ErrNotArray is the error of Elements for what is not a JSON array.
var ErrNotArray = errors.New("not a JSON array")

// Members calls fn with each member of the JSON object b, in order: its
// key, unescaped, and its value as it is in b (a slice of b). b must be
// valid JSON, as encoding/json hands an UnmarshalJSON method or as
// json.Valid checks it; for other input Members returns an error or
// members that make no sense, but never panics. null is an object with no
// members.
func Members(b []byte, fn func(key string, value []byte)) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '{' {
		return ErrNotObject
	}
	i := skipSpace(b, 1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		if end < 0 || b[i] != '"' || end-i < 2 {
			return ErrNotObject
		}
		key := string(b[i+1 : end-1])
		if bytes.IndexByte(b[i:end], '\\') >= 0 || !utf8.ValidString(key) {
			// As encoding/json reads it: escapes, and invalid UTF-8 replaced.
			if err := json.Unmarshal(b[i:end], &key); err != nil {
				return ErrNotObject
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ErrNotObject
		}
		i = skipSpace(b, i+1)
		end = valueEnd(b, i)
		if end < 0 || end == i {
			return ErrNotObject
		}
		fn(key, b[i:end])
		i = skipSpace(b, end)
	}
	return nil
}

// Elements calls fn with each element of the JSON array b, in order, as
// it is in b (a slice of b). As Members, b must be valid JSON; for other
// input Elements returns an error or elements that make no sense, but
// never panics. null is an array with no elements.
func Elements(b []byte, fn func(value []byte)) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '[' {
		return ErrNotArray
	}
	i := skipSpace(b, 1)
	for i < len(b) && b[i] != ']' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := valueEnd(b, i)
		if end < 0 || end == i {
			return ErrNotArray
		}
		fn(b[i:end])
		i = skipSpace(b, end)
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value that starts at
// b[i], or -1 when b ends first.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end := stringEnd(b, j)
			if end < 0 {
				return -1
			}
			if depth == 0 {
				return end
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // a scalar ended with the enclosing value
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	if depth == 0 {
		return len(b)
	}
	return -1
}

// stringEnd returns the index just past the string that opens at b[i],
// or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}
