package dynamodb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Conversion between the SDK's attribute values and the shared codec's.

type item = map[string]types.AttributeValue

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func toAV(v attr.Value) types.AttributeValue {
	switch v := v.(type) {
	case attr.S:
		return avS(string(v))
	case attr.N:
		return avN(string(v))
	case attr.Bool:
		return &types.AttributeValueMemberBOOL{Value: bool(v)}
	case attr.L:
		out := make([]types.AttributeValue, len(v))
		for i, e := range v {
			out[i] = toAV(e)
		}
		return &types.AttributeValueMemberL{Value: out}
	case attr.SS:
		return &types.AttributeValueMemberSS{Value: []string(v)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

func toAVItem(it attr.Item) item {
	out := make(item, len(it))
	for k, v := range it {
		out[k] = toAV(v)
	}
	return out
}

func fromAV(v types.AttributeValue) attr.Value {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return attr.S(v.Value)
	case *types.AttributeValueMemberN:
		return attr.N(v.Value)
	case *types.AttributeValueMemberBOOL:
		return attr.Bool(v.Value)
	case *types.AttributeValueMemberL:
		out := make(attr.L, len(v.Value))
		for i, e := range v.Value {
			out[i] = fromAV(e)
		}
		return out
	case *types.AttributeValueMemberSS:
		return attr.SS(v.Value)
	case *types.AttributeValueMemberNULL:
		return attr.Null{}
	case *types.AttributeValueMemberM:
		return attr.Other("a Map")
	case *types.AttributeValueMemberNS:
		return attr.Other("a Number Set")
	case *types.AttributeValueMemberB:
		return attr.Other("Binary")
	case *types.AttributeValueMemberBS:
		return attr.Other("a Binary Set")
	}
	return attr.Other("an unknown type")
}

func fromAVItem(m item) attr.Item {
	out := make(attr.Item, len(m))
	for k, v := range m {
		out[k] = fromAV(v)
	}
	return out
}
