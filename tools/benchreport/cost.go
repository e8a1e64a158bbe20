package main

// beats is the heartbeats of the cost table's activity: a 10-minute run,
// a heartbeat every 30 s.
const beats = 10 * 60 / 30

// activityCost is the cost table's arithmetic: the write and read units of
// one activity (its life, its heartbeats, and half of the start of the
// 2-activity workflow that carries it) and what they cost, in USD per
// million activities.
func activityCost(r unitsReport) (perW, perR, costW, costR float64) {
	var rd float64
	for _, p := range r.phases[1:] {
		rd += p.read
	}
	perW = lifeWrites(r) + r.heartbeat.write*beats + r.phases[0].write/2
	perR = rd + r.phases[0].read/2
	return perW, perR, perW * priceWriteUnit * 1e6, perR * priceReadUnit * 1e6
}
