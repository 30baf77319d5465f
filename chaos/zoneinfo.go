package chaos

import (
	"archive/zip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// writeOtherZoneinfo writes into dir a zone database (the zip layout $ZONEINFO names) in which
// Europe/Berlin has UTC's rules, what a host whose tzdata another update changed looks like,
// and returns its path. A silo started with ZONEINFO naming it must go on evaluating
// Europe/Berlin by the rules compiled into Orrery (it says "ZONEINFO is ignored").
func writeOtherZoneinfo(dir string) (string, error) {
	asUTC, ok := zonerules.Lookup("UTC")
	if !ok {
		return "", errors.New("no UTC in the embedded zone rules")
	}
	path := filepath.Join(dir, "zoneinfo.zip")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := zip.NewWriter(f)
	for _, name := range []string{"Europe/Berlin", "UTC"} {
		entry, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store}) // time reads stored entries only
		if err != nil {
			_ = f.Close()
			return "", err
		}
		if _, err := entry.Write(asUTC); err != nil {
			_ = f.Close()
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		_ = f.Close()
		return "", err
	}
	return path, f.Close()
}

// cronZone is the time zone of a workload's cron schedules.
const cronZone = "Europe/Berlin"

// cronZoneLocation is cronZone by the rules compiled into Orrery (package zonerules), which
// every silo must evaluate it by, whatever its ZONEINFO says.
func cronZoneLocation() (*time.Location, error) {
	rules, ok := zonerules.Lookup(cronZone)
	if !ok {
		return nil, fmt.Errorf("no %s in the embedded zone rules", cronZone)
	}
	return time.LoadLocationFromTZData(cronZone, rules)
}

// cronHours are two hours of cronZone, the one now and the one three hours later, in which a
// workload's cron schedules are due every 2 s. Under other rules for the zone those instants
// fall in other hours: UTC's rules, say, put them one or two hours later on the compiled rules
// (Berlin's offset in winter or in summer), never in either of the two hours, which are three
// apart. An occurrence at an instant outside them shows a silo evaluated other rules.
type cronHours struct {
	zone  *time.Location
	first int // the hour of the day at the workload's start, in zone
}

// second is the other hour of the two.
func (c cronHours) second() int { return (c.first + 3) % 24 }

// expression is the schedules' cron expression: every 2 s in the two hours.
func (c cronHours) expression() string {
	return fmt.Sprintf("*/2 * %d,%d * * *", c.first, c.second())
}

// holds reports whether instant is one of the expression's on the compiled rules: a whole even
// second in one of the two hours of the zone.
func (c cronHours) holds(instant time.Time) bool {
	hour := instant.In(c.zone).Hour()
	return instant.Nanosecond() == 0 && instant.Unix()%2 == 0 && (hour == c.first || hour == c.second())
}
