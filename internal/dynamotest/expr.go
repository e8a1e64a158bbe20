package dynamotest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"unicode"
)

// The fault proxy answers queries on an index from its own, lagging view
// of the index, so it evaluates the expressions Whimbrel sends itself: key
// conditions and filters over top-level attributes (comparisons, BETWEEN,
// IN, AND, OR, NOT, begins_with, contains, attribute_exists,
// attribute_not_exists). An expression outside that (a nested path, size)
// is refused with an error, and the proxy forwards the query unlagged.

// record is an item in DynamoDB's JSON form: name → attribute value.
type record = map[string]any

// cond is a parsed expression.
type cond interface {
	eval(it record) bool
}

type exprParser struct {
	toks   []string
	pos    int
	names  map[string]string
	values map[string]any
}

// parseExpr parses a condition expression with its placeholders.
func parseExpr(s string, names map[string]string, values map[string]any) (cond, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &exprParser{toks: toks, names: names, values: values}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q in %q", p.toks[p.pos], s)
	}
	return c, nil
}

func tokenize(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case strings.ContainsRune("(),", c):
			out = append(out, string(c))
			i++
		case c == '<' || c == '>' || c == '=':
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case c == '#' || c == ':' || c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c):
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '-' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			return nil, fmt.Errorf("unsupported character %q in %q", c, s)
		}
	}
	return out, nil
}

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *exprParser) next() string {
	t := p.peek()
	p.pos++
	return t
}

func (p *exprParser) expect(t string) error {
	if got := p.next(); !strings.EqualFold(got, t) {
		return fmt.Errorf("want %q, got %q", t, got)
	}
	return nil
}

type andCond []cond
type orCond []cond
type notCond struct{ c cond }
type funcCond func(it record) bool

func (a andCond) eval(it record) bool {
	for _, c := range a {
		if !c.eval(it) {
			return false
		}
	}
	return true
}

func (o orCond) eval(it record) bool {
	for _, c := range o {
		if c.eval(it) {
			return true
		}
	}
	return false
}

// eqCond is "name = :value", which a key condition's hash part is.
type eqCond struct {
	name  string
	value any
}

func (e eqCond) eval(it record) bool {
	v, ok := it[e.name]
	if !ok {
		return false
	}
	c, comparable := compareValues(v, e.value)
	return comparable && c == 0
}

func (n notCond) eval(it record) bool  { return !n.c.eval(it) }
func (f funcCond) eval(it record) bool { return f(it) }

func (p *exprParser) or() (cond, error) {
	c, err := p.and()
	if err != nil {
		return nil, err
	}
	out := orCond{c}
	for strings.EqualFold(p.peek(), "OR") {
		p.next()
		c, err := p.and()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

func (p *exprParser) and() (cond, error) {
	c, err := p.unary()
	if err != nil {
		return nil, err
	}
	out := andCond{c}
	for strings.EqualFold(p.peek(), "AND") {
		p.next()
		c, err := p.unary()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

func (p *exprParser) unary() (cond, error) {
	switch t := p.peek(); {
	case strings.EqualFold(t, "NOT"):
		p.next()
		c, err := p.unary()
		return notCond{c}, err
	case t == "(":
		p.next()
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	return p.comparison()
}

// operand is an attribute name or a value placeholder, evaluated on an item.
type operand func(it record) (any, bool)

func (p *exprParser) operand() (operand, string, error) {
	t := p.next()
	switch {
	case strings.HasPrefix(t, ":"):
		v, ok := p.values[t]
		if !ok {
			return nil, "", fmt.Errorf("no value for %s", t)
		}
		return func(record) (any, bool) { return v, true }, "", nil
	case strings.HasPrefix(t, "#"):
		n, ok := p.names[t]
		if !ok {
			return nil, "", fmt.Errorf("no name for %s", t)
		}
		return attrOperand(n), n, nil
	case t != "" && (unicode.IsLetter(rune(t[0])) || t[0] == '_'):
		if p.peek() == "(" {
			return nil, "", fmt.Errorf("function %s as an operand is not supported", t)
		}
		return attrOperand(t), t, nil
	}
	return nil, "", fmt.Errorf("unexpected %q", t)
}

func attrOperand(name string) operand {
	return func(it record) (any, bool) {
		v, ok := it[name]
		return v, ok
	}
}

func (p *exprParser) comparison() (cond, error) {
	if t := strings.ToLower(p.peek()); p.pos+1 < len(p.toks) && p.toks[p.pos+1] == "(" {
		p.next()
		p.next()
		var args []operand
		for {
			a, _, err := p.operand()
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			if p.peek() != "," {
				break
			}
			p.next()
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		switch {
		case t == "attribute_exists" && len(args) == 1:
			return funcCond(func(it record) bool { _, ok := args[0](it); return ok }), nil
		case t == "attribute_not_exists" && len(args) == 1:
			return funcCond(func(it record) bool { _, ok := args[0](it); return !ok }), nil
		case t == "begins_with" && len(args) == 2:
			return funcCond(func(it record) bool {
				a, ok1 := args[0](it)
				b, ok2 := args[1](it)
				sa, sb := scalarS(a), scalarS(b)
				return ok1 && ok2 && sa != nil && sb != nil && strings.HasPrefix(*sa, *sb)
			}), nil
		case t == "contains" && len(args) == 2:
			return funcCond(func(it record) bool {
				a, ok1 := args[0](it)
				b, ok2 := args[1](it)
				return ok1 && ok2 && containsValue(a, b)
			}), nil
		}
		return nil, fmt.Errorf("function %s/%d is not supported", t, len(args))
	}
	leftTok := p.peek()
	left, leftName, err := p.operand()
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch strings.ToUpper(op) {
	case "=", "<>", "<", "<=", ">", ">=":
		rightTok := p.peek()
		right, rightName, err := p.operand()
		if err != nil {
			return nil, err
		}
		if op == "=" && leftName != "" && strings.HasPrefix(rightTok, ":") {
			return eqCond{leftName, p.values[rightTok]}, nil
		}
		if op == "=" && rightName != "" && strings.HasPrefix(leftTok, ":") {
			return eqCond{rightName, p.values[leftTok]}, nil
		}
		return funcCond(func(it record) bool {
			a, ok1 := left(it)
			b, ok2 := right(it)
			if !ok1 || !ok2 {
				return false
			}
			c, comparable := compareValues(a, b)
			switch op {
			case "=":
				return comparable && c == 0
			case "<>":
				return !comparable || c != 0
			case "<":
				return comparable && c < 0
			case "<=":
				return comparable && c <= 0
			case ">":
				return comparable && c > 0
			}
			return comparable && c >= 0
		}), nil
	case "BETWEEN":
		lo, _, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.expect("AND"); err != nil {
			return nil, err
		}
		hi, _, err := p.operand()
		if err != nil {
			return nil, err
		}
		return funcCond(func(it record) bool {
			v, ok := left(it)
			l, _ := lo(it)
			h, _ := hi(it)
			c1, ok1 := compareValues(v, l)
			c2, ok2 := compareValues(v, h)
			return ok && ok1 && ok2 && c1 >= 0 && c2 <= 0
		}), nil
	case "IN":
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var set []operand
		for {
			o, _, err := p.operand()
			if err != nil {
				return nil, err
			}
			set = append(set, o)
			if p.peek() != "," {
				break
			}
			p.next()
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return funcCond(func(it record) bool {
			v, ok := left(it)
			if !ok {
				return false
			}
			for _, o := range set {
				w, _ := o(it)
				if c, ok := compareValues(v, w); ok && c == 0 {
					return true
				}
			}
			return false
		}), nil
	}
	return nil, fmt.Errorf("operator %q is not supported", op)
}

// scalarS returns a String value's string, or nil.
func scalarS(v any) *string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	s, ok := m["S"].(string)
	if !ok {
		return nil
	}
	return &s
}

// compareValues orders two attribute values of one scalar type (S by
// bytes, N as numbers); other types compare only as equal or not.
func compareValues(a, b any) (int, bool) {
	ma, ok1 := a.(map[string]any)
	mb, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return 0, false
	}
	if sa, ok := ma["S"].(string); ok {
		sb, ok := mb["S"].(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(sa, sb), true
	}
	if na, ok := ma["N"].(string); ok {
		nb, ok := mb["N"].(string)
		if !ok {
			return 0, false
		}
		ra, ok1 := new(big.Rat).SetString(na)
		rb, ok2 := new(big.Rat).SetString(nb)
		if !ok1 || !ok2 {
			return 0, false
		}
		return ra.Cmp(rb), true
	}
	if reflect.DeepEqual(normal(ma), normal(mb)) {
		return 0, true
	}
	return 1, len(ma) == 1 && len(mb) == 1 && sameType(ma, mb)
}

func sameType(a, b map[string]any) bool {
	for k := range a {
		_, ok := b[k]
		return ok
	}
	return false
}

func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// containsValue is contains(): a substring of a String, a member of a set
// or a list.
func containsValue(a, b any) bool {
	ma, ok := a.(map[string]any)
	if !ok {
		return false
	}
	mb, _ := b.(map[string]any)
	if s, ok := ma["S"].(string); ok {
		sb := scalarS(b)
		return sb != nil && strings.Contains(s, *sb)
	}
	for _, set := range []string{"SS", "NS"} {
		if members, ok := ma[set].([]any); ok {
			want := mb[set[:1]]
			for _, m := range members {
				if m == want {
					return true
				}
			}
			return false
		}
	}
	if l, ok := ma["L"].([]any); ok {
		for _, m := range l {
			if c, ok := compareValues(m, b); ok && c == 0 {
				return true
			}
		}
	}
	return false
}
