package allocator

import (
	"math"
	"strconv"
	"strings"
)

// haskellShow renders a group as Haskell's derived Show does (hail puts
// it into some error messages).
func (g *Group) haskellShow() string {
	var b strings.Builder
	b.WriteString("Group {name = ")
	b.WriteString(hsString(g.Name))
	b.WriteString(", uuid = ")
	b.WriteString(hsString(g.UUID))
	b.WriteString(", idx = ")
	b.WriteString(strconv.Itoa(g.Idx))
	b.WriteString(", allocPolicy = ")
	b.WriteString([...]string{"AllocPreferred", "AllocLastResort", "AllocUnallocable"}[g.AllocPolicy])
	b.WriteString(", networks = ")
	b.WriteString(hsStrings(g.Networks))
	b.WriteString(", iPolicy = IPolicy {iPolicyMinMaxISpecs = [")
	for i, mm := range g.Policy.MinMax {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("MinMaxISpecs {minMaxISpecsMinSpec = ")
		b.WriteString(hsSpec(mm.Min))
		b.WriteString(", minMaxISpecsMaxSpec = ")
		b.WriteString(hsSpec(mm.Max))
		b.WriteString("}")
	}
	b.WriteString("], iPolicyStdSpec = ")
	b.WriteString(hsSpec(g.Policy.Std))
	b.WriteString(", iPolicyDiskTemplates = [")
	for i, t := range g.Policy.DiskTemplates {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString([...]string{"DTDiskless", "DTFile", "DTSharedFile", "DTPlain", "DTBlock", "DTDrbd8", "DTRbd", "DTExt", "DTGluster"}[t])
	}
	b.WriteString("], iPolicyVcpuRatio = ")
	b.WriteString(hsDouble(g.Policy.VCPURatio))
	b.WriteString(", iPolicySpindleRatio = ")
	b.WriteString(hsDouble(g.Policy.SpindleRatio))
	b.WriteString("}, allTags = ")
	b.WriteString(hsStrings(g.Tags))
	b.WriteString("}")
	return b.String()
}

func hsSpec(s ISpec) string {
	return "ISpec {iSpecMemorySize = " + hsInt(s.MemorySize) + ", iSpecCpuCount = " + hsInt(s.CPUCount) +
		", iSpecDiskSize = " + hsInt(s.DiskSize) + ", iSpecDiskCount = " + hsInt(s.DiskCount) +
		", iSpecNicCount = " + hsInt(s.NICCount) + ", iSpecSpindleUse = " + hsInt(s.SpindleUse) + "}"
}

// hsInt shows an Int field (negative values are parenthesised in records).
func hsInt(v int) string {
	if v < 0 {
		return "(" + strconv.Itoa(v) + ")"
	}
	return strconv.Itoa(v)
}

func hsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r > 0x7e:
			b.WriteString(`\` + strconv.Itoa(int(r)))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hsStrings(xs []string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = hsString(x)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// hsDouble shows a Double like Haskell: 4.0, 0.5, 1.0e-2, 1.0e7.
func hsDouble(x float64) string {
	neg := ""
	if x < 0 {
		neg, x = "-", -x
	}
	var s string
	switch {
	case x == 0:
		s = "0.0"
	case math.IsInf(x, 0):
		s = "Infinity"
	case math.IsNaN(x):
		return "NaN"
	case x >= 0.1 && x < 1e7:
		s = strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
	default:
		m := strconv.FormatFloat(x, 'e', -1, 64) // 1.5e-02
		mant, exp, _ := strings.Cut(m, "e")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		s = mant + "e" + strconv.Itoa(e)
	}
	if neg != "" {
		return "(" + neg + s + ")"
	}
	return s
}
