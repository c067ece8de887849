package target

import (
	"fmt"
	"reflect"
	"strings"
	"text/template/parse"
	"time"
)

// Bounds of one rendering of a cluster's Helm values (RenderHelmValues or
// ProcessTemplateValues), over all its templates. Values come from git, so a
// template such as ${ range 100000000000 }, ${ repeat 1000000000 "x" } or a
// string doubled in a loop must fail at once rather than occupy the manager.
const (
	// MaxTemplateIterations is the most iterations all ranges may take, and
	// the longest list a function may make.
	MaxTemplateIterations = 100000
	// MaxTemplateOutput is the most bytes all templates may print.
	MaxTemplateOutput = 1 << 20
	// MaxTemplateValue is the largest value, in bytes as printed, a template
	// function may take or make.
	MaxTemplateValue = 1 << 20
	// MaxTemplateWork is the most bytes template functions may take and make
	// over all their calls, each call counting at least callCost.
	MaxTemplateWork = 32 << 20
	// MaxTemplateExpensiveCalls is how often the deliberately slow functions
	// (bcrypt, htpasswd, derivePassword, the *WithKey certificate functions)
	// may be called.
	MaxTemplateExpensiveCalls = 2
	// maxPrintfWidth bounds the width and precision of printf verbs, which
	// would otherwise make a huge string in one call.
	maxPrintfWidth = 1000
	// callCost is what a function call counts against MaxTemplateWork at
	// least.
	callCost = 64
)

// templateTimeout is the backstop of the bounds above: a rendering still
// running after it fails at its next function call or range. A variable so
// that tests can shorten it.
var templateTimeout = 2 * time.Second

// budget is what is left of the bounds of one rendering.
type budget struct {
	iterations int
	output     int
	work       int
	expensive  int
	deadline   time.Time
}

func newBudget() *budget {
	return &budget{
		iterations: MaxTemplateIterations,
		output:     MaxTemplateOutput,
		work:       MaxTemplateWork,
		expensive:  MaxTemplateExpensiveCalls,
		deadline:   time.Now().Add(templateTimeout),
	}
}

// take counts n bytes printed against the output bound.
func (b *budget) take(n int) error {
	b.output -= n
	if b.output < 0 {
		return fmt.Errorf("templates print more than %d bytes: make the values smaller", MaxTemplateOutput)
	}
	return nil
}

// spend counts n bytes of function work, and checks the clock.
func (b *budget) spend(n int) error {
	b.work -= n
	if b.work < 0 {
		return fmt.Errorf("template functions handle more than %d bytes in all: make the values smaller or the loops shorter", MaxTemplateWork)
	}
	if time.Now().After(b.deadline) {
		return fmt.Errorf("templates run longer than %s: make them simpler", templateTimeout)
	}
	return nil
}

// limitedWriter writes into a strings.Builder while the budget lasts.
type limitedWriter struct {
	sb *strings.Builder
	b  *budget
}

func (w limitedWriter) Write(p []byte) (int, error) {
	if err := w.b.take(len(p)); err != nil {
		return 0, err
	}
	return w.sb.Write(p)
}

// rangeCheck counts the iterations of a range over v against the budget.
func (b *budget) rangeCheck(v interface{}) (interface{}, error) {
	n := 0
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(min(max(rv.Int(), 0), MaxTemplateIterations+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int(min(rv.Uint(), MaxTemplateIterations+1))
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		n = rv.Len()
	case reflect.Invalid:
	default:
		return nil, fmt.Errorf("range over %s is not allowed: range over a number, list or map", rv.Kind())
	}
	b.iterations -= n
	if b.iterations < 0 {
		return nil, fmt.Errorf("templates iterate more than %d times: use smaller ranges", MaxTemplateIterations)
	}
	if err := b.spend(0); err != nil {
		return nil, err
	}
	return v, nil
}

// boundedPrintf is printf with widths and precisions of at most
// maxPrintfWidth and no "*" (a width taken from the arguments).
func boundedPrintf(format string, args ...interface{}) (string, error) {
	digits := 0
	inVerb := false
	for _, c := range format {
		switch {
		case !inVerb:
			inVerb = c == '%'
		case c == '*':
			return "", fmt.Errorf("printf: widths from arguments (*) are not allowed")
		case c >= '0' && c <= '9':
			digits = digits*10 + int(c-'0')
			if digits > maxPrintfWidth {
				return "", fmt.Errorf("printf: widths and precisions above %d are not allowed", maxPrintfWidth)
			}
		case c == '.':
			digits = 0
		case strings.ContainsRune("+-# ", c):
		default:
			inVerb, digits = false, 0
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// checkNodes rejects template calls (and so definitions, which only they
// could run): they would allow recursion.
func checkNodes(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.TemplateNode:
		return fmt.Errorf("template calls are not allowed in values")
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.RangeNode:
		return checkBranch(&n.BranchNode)
	}
	return nil
}

func checkBranch(b *parse.BranchNode) error {
	if err := checkNodes(b.List); err != nil {
		return err
	}
	return checkNodes(b.ElseList)
}

// boundRanges appends rangeFunc to the pipeline of every range in n.
func boundRanges(t *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			boundRanges(t, c)
		}
	case *parse.IfNode:
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	case *parse.WithNode:
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	case *parse.RangeNode:
		ident := parse.NewIdentifier(rangeFunc).SetTree(t).SetPos(n.Pos)
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{ident}})
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	}
}

// sizeOf estimates how many bytes v takes printed, counting the indentation
// a pretty printer gives nested values, so that a deep value is large. It
// stops counting once past limit, so it costs at most about limit steps and
// ends on values that contain themselves.
func sizeOf(v reflect.Value, depth, limit int) int {
	switch v.Kind() {
	case reflect.Invalid:
		return 4
	case reflect.Interface:
		if v.IsNil() {
			return 4
		}
		return sizeOf(v.Elem(), depth, limit)
	case reflect.String:
		return v.Len() + 2
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len() + 2
		}
		n := 2
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += 2*depth + 2 + sizeOf(v.Index(i), depth+1, limit-n)
		}
		return n
	case reflect.Map:
		n := 2
		it := v.MapRange()
		for it.Next() && n <= limit {
			n += 2*depth + 4 + sizeOf(it.Key(), depth+1, limit-n)
			n += sizeOf(it.Value(), depth+1, limit-n)
		}
		return n
	default:
		return 8
	}
}

// reaches tells whether v holds the map m, at any depth. Walking stops after
// limit values: what is that large is refused by size anyway.
func reaches(v reflect.Value, m uintptr, limit *int) bool {
	*limit--
	if *limit < 0 {
		return false
	}
	switch v.Kind() {
	case reflect.Interface:
		return !v.IsNil() && reaches(v.Elem(), m, limit)
	case reflect.Map:
		if v.Pointer() == m {
			return true
		}
		it := v.MapRange()
		for it.Next() {
			if reaches(it.Value(), m, limit) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		for i := range v.Len() {
			if reaches(v.Index(i), m, limit) {
				return true
			}
		}
	}
	return false
}
