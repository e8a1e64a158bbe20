package web

import (
	"fmt"
	"sort"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
)

// Sizes of the drawn DAG, in SVG user units.
const (
	nodeW   = 190
	nodeH   = 58
	colGap  = 64
	rowGap  = 16
	dagPad  = 12
	maxName = 22 // longer names are cut in the node (the full name is its title)
)

// dag is an execution's activities laid out left to right: each activity in
// the column of its longest path from a source, so every edge points right.
type dag struct {
	W, H  int
	Nodes []dagNode
	Edges []dagEdge
}

type dagNode struct {
	Row        *activityRow
	X, Y       int
	Label      string // the name, cut to fit
	TextX      int
	NameY      int
	StateY     int
	DetailY    int
	BarY       int // a for_each map's progress bar, along the node's foot
	RightX     int
	AttemptTxt string
}

type dagEdge struct {
	Path  string
	Class string // the upstream's state class: a completed upstream draws solid
}

// layout places rows. Columns come from the dependencies among the rows
// (an unknown dependency is ignored, and so is a cycle, which a stored
// definition cannot hold but a hand-edited item could); within a column,
// nodes are ordered by the mean position of their neighbours, a few sweeps
// each way, which untangles most crossings of real DAGs.
func layout(rows []*activityRow) dag {
	index := map[string]int{}
	for i, r := range rows {
		if _, dup := index[r.Name]; !dup {
			index[r.Name] = i
		}
	}
	ups := make([][]int, len(rows))
	downs := make([][]int, len(rows))
	for i, r := range rows {
		for _, d := range r.DependsOn {
			if j, ok := index[d]; ok && j != i {
				ups[i] = append(ups[i], j)
				downs[j] = append(downs[j], i)
			}
		}
	}
	// Longest path from a source, by relaxation; at most len(rows) rounds,
	// so a cycle cannot loop forever.
	col := make([]int, len(rows))
	for round := 0; round < len(rows); round++ {
		changed := false
		for i := range rows {
			for _, j := range ups[i] {
				if col[j]+1 > col[i] && col[j]+1 <= len(rows) {
					col[i] = col[j] + 1
					changed = true
				}
			}
		}
		if !changed {
			break
		}
	}
	ncols := 0
	for _, c := range col {
		ncols = max(ncols, c+1)
	}
	cols := make([][]int, ncols)
	for i := range rows {
		cols[col[i]] = append(cols[col[i]], i)
	}
	pos := make([]float64, len(rows))
	place := func() {
		for _, c := range cols {
			for k, i := range c {
				pos[i] = float64(k)
			}
		}
	}
	place()
	sweep := func(c []int, nbrs [][]int) {
		key := map[int]float64{}
		for _, i := range c {
			if len(nbrs[i]) == 0 {
				key[i] = pos[i]
				continue
			}
			sum := 0.0
			for _, j := range nbrs[i] {
				sum += pos[j]
			}
			key[i] = sum / float64(len(nbrs[i]))
		}
		sort.SliceStable(c, func(a, b int) bool { return key[c[a]] < key[c[b]] })
		for k, i := range c {
			pos[i] = float64(k)
		}
	}
	for range 4 {
		for k := 1; k < ncols; k++ {
			sweep(cols[k], ups)
		}
		for k := ncols - 2; k >= 0; k-- {
			sweep(cols[k], downs)
		}
	}
	tallest := 0
	for _, c := range cols {
		tallest = max(tallest, len(c))
	}
	d := dag{W: 2*dagPad + ncols*nodeW + max(0, ncols-1)*colGap, H: 2*dagPad + tallest*nodeH + max(0, tallest-1)*rowGap}
	xy := make([][2]int, len(rows))
	for k, c := range cols {
		offset := (tallest - len(c)) * (nodeH + rowGap) / 2
		for n, i := range c {
			xy[i] = [2]int{dagPad + k*(nodeW+colGap), dagPad + offset + n*(nodeH+rowGap)}
		}
	}
	for i, r := range rows {
		x, y := xy[i][0], xy[i][1]
		label := r.Name
		if rs := []rune(label); len(rs) > maxName {
			label = string(rs[:maxName-1]) + "…"
		}
		n := dagNode{Row: r, X: x, Y: y, Label: label, TextX: x + 12, NameY: y + 20, StateY: y + 37, DetailY: y + 51, BarY: y + 54, RightX: x + nodeW - 10}
		switch {
		case r.Attempt > 0 && r.MaxAttempts > 1:
			n.AttemptTxt = fmt.Sprintf("#%d/%d", r.Attempt, r.MaxAttempts)
		case r.Attempt > 0:
			n.AttemptTxt = fmt.Sprintf("#%d", r.Attempt)
		}
		d.Nodes = append(d.Nodes, n)
	}
	for i := range rows {
		for _, j := range ups[i] {
			if col[j] >= col[i] { // part of a cycle: not drawn
				continue
			}
			x1, y1 := xy[j][0]+nodeW, xy[j][1]+nodeH/2
			x2, y2 := xy[i][0]-4, xy[i][1]+nodeH/2
			mx := (x1 + x2) / 2
			d.Edges = append(d.Edges, dagEdge{
				Path:  fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mx, y1, mx, y2, x2, y2),
				Class: rows[j].Class,
			})
		}
	}
	return d
}

// activityRows wraps what inspect returned with what the page shows.
func activityRows(acts []inspect.Activity, readAt time.Time) []*activityRow {
	rows := make([]*activityRow, 0, len(acts))
	for i := range acts {
		rows = append(rows, newActivityRow(&acts[i], readAt))
	}
	return rows
}
