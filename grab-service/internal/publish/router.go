package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
)

// FlowLog is the MySQL flow log as the degrade path writes it (store.Flows).
// InsertFlows is idempotent on (request, kind, promotion) and skips a CANCEL
// whose GRAB is not in the log; OweCancels keeps a copy of such CANCELs until
// their GRAB arrives (store/owed.go).
type FlowLog interface {
	InsertFlows(ctx context.Context, events []flow.Event) (int, error)
	HasGrab(ctx context.Context, requestID, promoID string, typ int) (bool, error)
	OweCancels(ctx context.Context, events []flow.Event) error
}

// Publisher commits flow events: Publish returns nil only once every event is
// acknowledged (Kafka with acks=all); Router wraps one.
type Publisher interface {
	Publish(ctx context.Context, events ...flow.Event) error
}

// Router is the commit path's publisher (grab.Publisher): to Kafka, or while
// kafkaDegrade is on straight into the MySQL flow log; nil means committed either
// way. A CANCEL goes to MySQL only if its GRAB is there, else behind it on Kafka,
// else stays owed (docs/design.md, "Flow events batched across partitions").
type Router struct {
	kafka    Publisher
	log      FlowLog
	switches *configcenter.Holder
	routed   *prometheus.CounterVec
}

// NewRouter wraps the Kafka publisher; reg may be nil.
func NewRouter(kafka Publisher, log FlowLog, switches *configcenter.Holder, reg prometheus.Registerer) *Router {
	p := &Router{kafka: kafka, log: log, switches: switches,
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flashsale", Subsystem: "grab",
			Name: "flow_events_routed_total", Help: "Flow events committed, by route: kafka, mysql (degraded), kafka_behind_grab (a degraded CANCEL whose GRAB is not in MySQL yet), mysql_kafka_refused (a CANCEL Kafka refused whose GRAB is in MySQL), or mysql_owed (a CANCEL that could go to neither, copied to the owed list; still owed in Redis)."},
			[]string{"route"})}
	if reg != nil {
		reg.MustRegister(p.routed)
	}
	return p
}

// Publish implements grab.Publisher.
func (p *Router) Publish(ctx context.Context, events ...flow.Event) error {
	if !p.switches.Load().KafkaDegrade {
		err := p.kafka.Publish(ctx, events...)
		if err == nil {
			p.routed.WithLabelValues("kafka").Add(float64(len(events)))
			return nil
		}
		if !allCancels(events) {
			return err
		}
		return p.recordCancels(ctx, events, err)
	}
	toLog, behind, err := p.split(ctx, events)
	if err != nil {
		return err
	}
	if err := p.logFlows(ctx, toLog, "mysql"); err != nil {
		return fmt.Errorf("degraded: %w", err)
	}
	if len(behind) > 0 {
		if err := p.kafka.Publish(ctx, behind...); err != nil {
			return p.owe(ctx, behind, fmt.Errorf("degraded: they must follow their GRAB through Kafka: %w", err))
		}
		p.routed.WithLabelValues("kafka_behind_grab").Add(float64(len(behind)))
	}
	return nil
}

// fallbackTimeout bounds the MySQL writes that follow a Kafka refusal. They get a
// budget of their own: a Kafka attempt that timed out has used up the caller's, and
// the copy written here may be the only one left of the debt.
const fallbackTimeout = 2 * time.Second

// recordCancels writes the items of CANCELs Kafka refused (kafkaErr) whose GRAB is
// in MySQL; it returns nil only when every item is recorded.
func (p *Router) recordCancels(ctx context.Context, events []flow.Event, kafkaErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fallbackTimeout)
	defer cancel()
	toLog, behind, err := p.split(ctx, events)
	if err != nil {
		return errors.Join(kafkaErr, err)
	}
	if err := p.logFlows(ctx, toLog, "mysql_kafka_refused"); err != nil {
		return errors.Join(kafkaErr, err)
	}
	if len(behind) > 0 {
		return p.owe(ctx, behind, kafkaErr)
	}
	return nil
}

// owe keeps a copy of CANCELs whose GRAB is not in MySQL yet and that Kafka did not
// take (cause) in the record's owed list. The error it returns still says they are
// not committed, so the debt stays in the ledger too and the reconciler retries it.
func (p *Router) owe(ctx context.Context, cancels []flow.Event, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fallbackTimeout)
	defer cancel()
	if err := p.log.OweCancels(ctx, cancels); err != nil {
		return fmt.Errorf("%d CANCEL events wait for their GRAB, not in MySQL yet, and no copy was kept: %w", len(cancels), errors.Join(cause, err))
	}
	p.routed.WithLabelValues("mysql_owed").Add(float64(len(cancels)))
	return fmt.Errorf("%d CANCEL events wait for their GRAB, not in MySQL yet (a copy is kept in the record's owed list): %w", len(cancels), cause)
}

// logFlows writes events to the MySQL flow log and counts them under route.
func (p *Router) logFlows(ctx context.Context, events []flow.Event, route string) error {
	if len(events) == 0 {
		return nil
	}
	if _, err := p.log.InsertFlows(ctx, events); err != nil {
		return fmt.Errorf("write %d flow events to MySQL: %w", len(events), err)
	}
	p.routed.WithLabelValues(route).Add(float64(len(events)))
	return nil
}

func allCancels(events []flow.Event) bool {
	for _, e := range events {
		if e.Kind != flow.Cancel {
			return false
		}
	}
	return true
}

type grabRef struct {
	rid, promoID string
	typ          int
}

// split sends GRABs to the log, and each CANCEL item to the log if its GRAB is
// there (or in this batch), else to Kafka. A GRAB row is never deleted, so one
// seen here is still there when the CANCEL is inserted.
func (p *Router) split(ctx context.Context, events []flow.Event) (toLog, behind []flow.Event, err error) {
	inBatch := map[grabRef]bool{}
	for _, e := range events {
		if e.Kind == flow.Grab {
			for _, it := range e.Items {
				inBatch[grabRef{e.RequestID, it.PromoID, it.Type}] = true
			}
		}
	}
	for _, e := range events {
		if e.Kind != flow.Cancel {
			toLog = append(toLog, e)
			continue
		}
		logged, notYet := e, e
		logged.Items, notYet.Items = nil, nil
		for _, it := range e.Items {
			there := inBatch[grabRef{e.RequestID, it.PromoID, it.Type}]
			if !there {
				if there, err = p.log.HasGrab(ctx, e.RequestID, it.PromoID, it.Type); err != nil {
					return nil, nil, fmt.Errorf("degraded: is the GRAB of CANCEL %s in MySQL: %w", e.RequestID, err)
				}
			}
			if there {
				logged.Items = append(logged.Items, it)
			} else {
				notYet.Items = append(notYet.Items, it)
			}
		}
		if len(logged.Items) > 0 {
			toLog = append(toLog, logged)
		}
		if len(notYet.Items) > 0 {
			behind = append(behind, notYet)
		}
	}
	return toLog, behind, nil
}
