package main

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// faultAround is the kernel's default fault-around (fault_around_bytes): a
// read fault on a file mapping maps up to this much around the faulting
// page when it is in the page cache, so one touched byte costs a window.
const faultAround = 64 << 10

// filePages tells which of the binary's sections are resident in process
// pid, by page (/proc/PID/pagemap, read only), and how many fault-around
// windows of each were touched: what the file-backed RSS is made of. It
// returns "" when the figures cannot be read (not Linux, no permission).
func filePages(pid int, bin string) string {
	f, err := elf.Open(bin)
	if err != nil {
		return ""
	}
	defer f.Close()
	abs, err := filepath.Abs(bin)
	if err != nil {
		return ""
	}
	exe, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return ""
	}
	present, err := residentPages(pid, exe)
	if err != nil || len(present) == 0 {
		return ""
	}
	const page = 4096
	var parts []string
	var otherSize, otherRes uint64
	for _, s := range f.Sections {
		if s.Addr == 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		var res uint64
		windows, touched := 0, 0
		for w := s.Addr &^ (faultAround - 1); w < s.Addr+s.Size; w += faultAround {
			windows++
			hit := false
			for a := w; a < w+faultAround; a += page {
				if a+page <= s.Addr || a >= s.Addr+s.Size || !present[a] {
					continue
				}
				res += page
				hit = true
			}
			if hit {
				touched++
			}
		}
		switch s.Name {
		case ".text", ".rodata", ".gopclntab":
			parts = append(parts, fmt.Sprintf("%s %.1f of %.1f MB (%d of %d 64K windows)",
				s.Name, float64(res)/(1<<20), float64(s.Size)/(1<<20), touched, windows))
		default:
			otherSize += s.Size
			otherRes += res
		}
	}
	parts = append(parts, fmt.Sprintf("other sections %.1f of %.1f MB", float64(otherRes)/(1<<20), float64(otherSize)/(1<<20)))
	return "binary's resident pages: " + strings.Join(parts, ", ")
}

// residentPages returns the resident pages (by address) of pid's mappings
// of the file exe.
func residentPages(pid int, exe string) (map[uint64]bool, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	present := map[uint64]bool{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[5] != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		// One 64-bit entry per page; bit 63 is "present in RAM".
		buf := make([]byte, (end-start)/4096*8)
		if _, err := pm.ReadAt(buf, int64(start/4096*8)); err != nil {
			return nil, err
		}
		for i := 0; i < len(buf); i += 8 {
			if binary.LittleEndian.Uint64(buf[i:])&(1<<63) != 0 {
				present[start+uint64(i/8)*4096] = true
			}
		}
	}
	return present, sc.Err()
}
