package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Formats are the output formats of --format.
var Formats = []string{"table", "csv", "json", "markdown"}

// columnTitles are the table's and Markdown's titles of the holder labels.
var columnTitles = map[string]string{
	"k8s_namespace_name": "NAMESPACE", "k8s_pod_name": "POD", "user": "USER",
	"slurm_job_id": "JOB", "hw_id": "GPU",
}

// grid is a report as cells: the table, Markdown and CSV write it.
type grid struct {
	title   string
	headers []string
	rows    [][]string
	total   []string
	advice  []adviceLine
	// numeric is the first column of figures; they run to the one before
	// the last (the state), right-aligned in Markdown.
	numeric int
}

type adviceLine struct{ state, who, text, link string }

func hours(s float64) string { return strconv.FormatFloat(s/3600, 'f', 2, 64) }

// clock writes seconds as h:mm:ss, for one job's GPUs.
func clock(s float64) string {
	d := time.Duration(math.Round(s)) * time.Second
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }

func gib(b float64) string { return strconv.FormatFloat(b/(1<<30), 'f', 1, 64) + " GiB" }

func (r Row) costCell() string {
	if !r.CostKnown {
		return "-"
	}
	return strconv.FormatFloat(r.Cost, 'f', 2, 64)
}

func (r Row) memoryCell() string {
	if !r.HasMemory {
		return "-"
	}
	return gib(r.PeakMemory)
}

// statesCell is the state with its share, or every state of a job's GPU.
func (r Row) statesCell(all bool) string {
	if r.State == "" {
		return "-"
	}
	if !all {
		return fmt.Sprintf("%s (%s)", r.State, percent(r.States[r.State]))
	}
	states := sortedKeys(r.States)
	sort.SliceStable(states, func(i, j int) bool { return r.States[states[i]] > r.States[states[j]] })
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = fmt.Sprintf("%s %s", s, percent(r.States[s]))
	}
	return strings.Join(parts, ", ")
}

func (s *Summary) rangeLine() string {
	return fmt.Sprintf("%s to %s (%s)", s.From.UTC().Format(time.RFC3339), s.To.UTC().Format(time.RFC3339), span(s.To.Sub(s.From)))
}

// span writes a range's length plainly: 30d, 6h0m0s, 10m0s.
func span(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (s *Summary) totals() Row {
	t := Row{CostKnown: true}
	for _, r := range s.Rows {
		t.Held += r.Held
		t.Busy += r.Busy
		t.Active += r.Active
		t.Idle += r.Idle
		t.Cost += r.Cost
		t.CostKnown = t.CostKnown && r.CostKnown
		t.HasActive = t.HasActive || r.HasActive
		if r.HasMemory {
			t.HasMemory = true
			t.PeakMemory = math.Max(t.PeakMemory, r.PeakMemory)
		}
	}
	return t
}

func (s *Summary) holderCells(r Row) []string {
	out := make([]string, len(s.Kind.Labels))
	for i, l := range s.Kind.Labels {
		out[i] = r.Holder[l]
		if out[i] == "" {
			out[i] = "-"
		}
	}
	return out
}

func (s *Summary) adviceLines(who func(Row) string) []adviceLine {
	byState := map[string][]string{}
	for _, r := range s.Rows {
		if r.State != "" && r.State != "gpu_bound" {
			byState[r.State] = append(byState[r.State], who(r))
		}
	}
	var out []adviceLine
	for _, st := range stateOrder {
		if w, ok := byState[st]; ok {
			if len(w) > 3 {
				w = append(w[:3:3], fmt.Sprintf("%d more", len(w)-3))
			}
			out = append(out, adviceLine{st, strings.Join(w, ", "), adviceFor(st), RunbookLink(s.RunbookURL, st)})
		}
	}
	return out
}

func (s *Summary) grid() grid {
	g := grid{title: fmt.Sprintf("GPU-hours by %s, %s; %s counters", s.Kind.Name, s.rangeLine(), s.Source), numeric: len(s.Kind.Labels)}
	for _, l := range s.Kind.Labels {
		g.headers = append(g.headers, columnTitles[l])
	}
	g.headers = append(g.headers, "HELD", "BUSY", "ACTIVE", "IDLE", "EFFICIENCY", "COST", "PEAK MEMORY", "STATE")
	for _, r := range s.Rows {
		g.rows = append(g.rows, append(s.holderCells(r), hours(r.Held), hours(r.Busy), hours(r.Active), hours(r.Idle),
			percent(r.Efficiency()), r.costCell(), r.memoryCell(), r.statesCell(false)))
	}
	t := s.totals()
	tot := make([]string, len(s.Kind.Labels))
	tot[0] = "TOTAL"
	g.total = append(tot, hours(t.Held), hours(t.Busy), hours(t.Active), hours(t.Idle), percent(t.Efficiency()), t.costCell(), t.memoryCell(), "")
	g.advice = s.adviceLines(s.holderName)
	return g
}

// holderName is a holder as the advice names it: its job id, ns/pod, or
// name.
func (s *Summary) holderName(r Row) string {
	if s.Kind.Name == "job" {
		return r.Holder["slurm_job_id"]
	}
	var parts []string
	for _, l := range s.Kind.Labels {
		if v := r.Holder[l]; v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, "/")
}

func (js *JobSummary) grid() grid {
	s := js.Summary
	who := js.Holder.String()
	if js.User != "" {
		who += " (user " + js.User + ")"
	}
	g := grid{title: fmt.Sprintf("%s: %d GPU(s), %s", who, len(s.Rows), s.rangeLine()), numeric: 2}
	g.headers = []string{"GPU", "NODE", "HELD", "BUSY", "ACTIVE", "IDLE", "EFFICIENCY", "PEAK MEMORY", "STATES"}
	for _, r := range s.Rows {
		node := r.Holder["node"]
		if node == "" {
			node = "-"
		}
		g.rows = append(g.rows, []string{r.Holder["hw_id"], node, clock(r.Held), clock(r.Busy), clock(r.Active), clock(r.Idle),
			percent(r.Efficiency()), r.memoryCell(), r.statesCell(true)})
	}
	t := s.totals()
	g.total = []string{"TOTAL", "", clock(t.Held), clock(t.Busy), clock(t.Active), clock(t.Idle), percent(t.Efficiency()), t.memoryCell(),
		fmt.Sprintf("%s GPU-hours held, cost %s", hours(t.Held), t.costCell())}
	// Every state a GPU spent a tenth of its time in gets its advice.
	byState := map[string][]string{}
	for _, r := range s.Rows {
		for st, share := range r.States {
			if st != "gpu_bound" && share >= 0.1 {
				byState[st] = append(byState[st], r.Holder["hw_id"])
			}
		}
	}
	for _, st := range stateOrder {
		if w, ok := byState[st]; ok {
			g.advice = append(g.advice, adviceLine{st, strings.Join(w, ", "), adviceFor(st), RunbookLink(s.RunbookURL, st)})
		}
	}
	return g
}

func writeTable(w io.Writer, g grid) error {
	fmt.Fprintln(w, g.title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(g.headers, "\t"))
	for _, r := range g.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	fmt.Fprintln(tw, strings.Join(g.total, "\t"))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(g.advice) > 0 {
		fmt.Fprintln(w, "\nWhat to do:")
		for _, a := range g.advice {
			fmt.Fprintf(w, "  %s (%s): %s\n", a.state, a.who, a.text)
			if a.link != "" {
				fmt.Fprintf(w, "    %s\n", a.link)
			}
		}
	}
	return nil
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func writeMarkdown(w io.Writer, g grid) error {
	fmt.Fprintf(w, "**%s**\n\n", mdCell(g.title))
	row := func(cells []string) {
		esc := make([]string, len(cells))
		for i, c := range cells {
			esc[i] = mdCell(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(esc, " | "))
	}
	row(g.headers)
	sep := make([]string, len(g.headers))
	for i := range sep {
		sep[i] = "---"
		if i >= g.numeric && i < len(g.headers)-1 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(sep, " | "))
	for _, r := range g.rows {
		row(r)
	}
	total := append([]string(nil), g.total...)
	for i, c := range total {
		if c != "" {
			total[i] = "**" + c + "**"
		}
	}
	row(total)
	if len(g.advice) > 0 {
		fmt.Fprintln(w)
		for _, a := range g.advice {
			link := ""
			if a.link != "" {
				link = fmt.Sprintf(" ([runbook](%s))", a.link)
			}
			fmt.Fprintf(w, "- **%s** (%s): %s%s\n", a.state, mdCell(a.who), a.text, link)
		}
	}
	return nil
}

// csvNumber writes a figure for a spreadsheet: plain, 6 decimals at most.
func csvNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func round(f float64, n int) float64 {
	p := math.Pow(10, float64(n))
	return math.Round(f*p) / p
}

// jsonRow is a row of the JSON and CSV outputs: hours, fractions, bytes.
type jsonRow struct {
	Holder         map[string]string  `json:"holder"`
	HeldGPUHours   float64            `json:"held_gpu_hours"`
	BusyGPUHours   float64            `json:"busy_gpu_hours"`
	ActiveGPUHours float64            `json:"active_gpu_hours"`
	IdleGPUHours   float64            `json:"idle_gpu_hours"`
	Efficiency     float64            `json:"efficiency"`
	Cost           *float64           `json:"cost"`
	PeakMemory     *float64           `json:"peak_memory_bytes"`
	State          string             `json:"state"`
	States         map[string]float64 `json:"states,omitempty"`
	Advice         string             `json:"advice,omitempty"`
	RunbookURL     string             `json:"runbook_url,omitempty"`
}

func (s *Summary) jsonRow(r Row) jsonRow {
	j := jsonRow{Holder: r.Holder, HeldGPUHours: round(r.Held/3600, 6), BusyGPUHours: round(r.Busy/3600, 6),
		ActiveGPUHours: round(r.Active/3600, 6), IdleGPUHours: round(r.Idle/3600, 6), Efficiency: round(r.Efficiency(), 6),
		State: r.State, Advice: adviceFor(r.State), RunbookURL: RunbookLink(s.RunbookURL, r.State)}
	if r.CostKnown {
		c := round(r.Cost, 6)
		j.Cost = &c
	}
	if r.HasMemory {
		m := r.PeakMemory
		j.PeakMemory = &m
	}
	if len(r.States) > 0 {
		j.States = map[string]float64{}
		for k, v := range r.States {
			j.States[k] = round(v, 4)
		}
	}
	return j
}

func (s *Summary) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := append(append([]string(nil), s.Kind.Labels...), "held_gpu_hours", "busy_gpu_hours", "active_gpu_hours", "idle_gpu_hours",
		"efficiency", "cost", "peak_memory_bytes", "state", "state_share", "advice", "runbook_url")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range s.Rows {
		j := s.jsonRow(r)
		rec := make([]string, 0, len(head))
		for _, l := range s.Kind.Labels {
			rec = append(rec, r.Holder[l])
		}
		cost, mem, share := "", "", ""
		if j.Cost != nil {
			cost = csvNumber(*j.Cost)
		}
		if j.PeakMemory != nil {
			mem = csvNumber(*j.PeakMemory)
		}
		if r.State != "" {
			share = csvNumber(round(r.States[r.State], 4))
		}
		rec = append(rec, csvNumber(j.HeldGPUHours), csvNumber(j.BusyGPUHours), csvNumber(j.ActiveGPUHours), csvNumber(j.IdleGPUHours),
			csvNumber(j.Efficiency), cost, mem, r.State, share, j.Advice, j.RunbookURL)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

type jsonSummary struct {
	By     string    `json:"by"`
	Holder string    `json:"holder,omitempty"`
	User   string    `json:"user,omitempty"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Source Source    `json:"source"`
	Rows   []jsonRow `json:"rows"`
}

func (s *Summary) json() jsonSummary {
	out := jsonSummary{By: s.Kind.Name, From: s.From.UTC(), To: s.To.UTC(), Source: s.Source, Rows: []jsonRow{}}
	for _, r := range s.Rows {
		out.Rows = append(out.Rows, s.jsonRow(r))
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Write writes the summary in format (table, csv, json or markdown).
func (s *Summary) Write(w io.Writer, format string) error {
	switch format {
	case "table", "":
		return writeTable(w, s.grid())
	case "markdown":
		return writeMarkdown(w, s.grid())
	case "csv":
		return s.writeCSV(w)
	case "json":
		return writeJSON(w, s.json())
	}
	return fmt.Errorf("--format %q: give one of %s", format, strings.Join(Formats, ", "))
}

// Write writes the job's summary in format.
func (js *JobSummary) Write(w io.Writer, format string) error {
	switch format {
	case "table", "":
		return writeTable(w, js.grid())
	case "markdown":
		return writeMarkdown(w, js.grid())
	case "csv":
		return js.Summary.writeCSV(w)
	case "json":
		j := js.Summary.json()
		j.Holder, j.User = js.Holder.String(), js.User
		return writeJSON(w, j)
	}
	return fmt.Errorf("--format %q: give one of %s", format, strings.Join(Formats, ", "))
}
