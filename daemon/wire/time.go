package wire

// TimeFormat is how every time in the API is written: RFC 3339 with
// milliseconds and a numeric offset, as the seed shows.
const TimeFormat = "2006-01-02T15:04:05.000-07:00"
