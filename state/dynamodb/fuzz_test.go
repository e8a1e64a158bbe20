package dynamodb

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
	"github.com/whimbrel/whimbrel/state/internal/fuzzitem"
)

// FuzzDecodeItem: items of any shape, as the SDK hands them over (every
// DynamoDB type, nested), decoded the way the store decodes what it reads:
// nothing panics, and every error is a *state.DecodeError that names the
// attribute.
func FuzzDecodeItem(f *testing.F) {
	for _, seed := range []string{"", "\x00\x05\x10\x02\x04\x06", "\x01\x14\x05\x04\x07\x01\x02\x03\x04\x05\x06", "\x00\xff\xfe\xfd\xfc\xfb\xfa"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := item{}
		for k, v := range fuzzitem.Item(data) {
			m[k] = sdkValue(v)
		}
		it := fromAVItem(m)
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				return
			}
			var de *state.DecodeError
			if !errors.As(err, &de) || de.Attr == "" || !strings.Contains(err.Error(), de.Attr) || !errors.Is(err, state.ErrInvalidItem) {
				t.Fatalf("%s: error %v (%T) does not name the attribute", what, err, err)
			}
		}
		_, err := attr.DecodeActivity("t", it)
		check("activity", err)
		_, err = attr.DecodeRef("t", it)
		check("state index entry", err)
		_, err = attr.DecodeWorkflow("t", it)
		check("workflow", err)
		_, err = attr.DecodeDependency("t", it)
		check("dependency", err)
		_, err = attr.DecodeInstallStatus("t", it)
		check("install status", err)
		_, err = attr.DecodeRegistration("t", it)
		check("registration", err)
		_, err = attr.DecodeRequest(TableWorkflowRequest, fromAVItem(m))
		check("request image", err)
		_, err = attr.DecodeEvent(TableActivityEvent, fromAVItem(m))
		check("event image", err)
		if err := attr.Conflict("activity", "t", "id", attr.Cond{States: []string{"RUNNING"}}, it); !errors.Is(err, state.ErrConflict) {
			check("conflict", err)
		}
	})
}

// sdkValue converts a fuzzitem value to the SDK's.
func sdkValue(v any) types.AttributeValue {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}
	case fuzzitem.Num:
		return &types.AttributeValueMemberN{Value: string(v)}
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}
	case []any:
		l := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		for _, e := range v {
			l.Value = append(l.Value, sdkValue(e))
		}
		return l
	case []string:
		return &types.AttributeValueMemberSS{Value: v}
	case map[string]any:
		m := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
		for k, e := range v {
			m.Value[k] = sdkValue(e)
		}
		return m
	case fuzzitem.NumSet:
		return &types.AttributeValueMemberNS{Value: v}
	case fuzzitem.Binary:
		return &types.AttributeValueMemberB{Value: v}
	case fuzzitem.BinarySet:
		bs := &types.AttributeValueMemberBS{}
		for _, b := range v {
			bs.Value = append(bs.Value, b)
		}
		return bs
	}
	return &types.AttributeValueMemberNULL{Value: true}
}
