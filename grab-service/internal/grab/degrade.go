package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
)

// FlowLog is the MySQL flow log as the degrade path writes it (store.Store).
// InsertFlows is idempotent on (request, kind, promotion) and skips a CANCEL
// whose GRAB is not in the log; OweCancels keeps a copy of such CANCELs until
// their GRAB arrives (store/owed.go).
type FlowLog interface {
	InsertFlows(ctx context.Context, events []flow.Event) (int, error)
	HasGrab(ctx context.Context, requestID, promoID string, typ int) (bool, error)
	OweCancels(ctx context.Context, events []flow.Event) error
}

// DegradePublisher is the commit path's Publisher. It routes each Publish by the
// switches in force: to Kafka, or, while kafkaDegrade is on, straight into the
// MySQL flow log in one transaction. A nil return still means "committed", so
// the grab path answers GRANTED only after the MySQL commit and rolls back
// otherwise, exactly as with Kafka. Flows written here are never written twice:
// they do not go to Kafka, and the sink's inserts are idempotent anyway.
//
// The CANCEL case. A CANCEL written to MySQL is skipped when its GRAB is not in
// the log, which is right for the rollback of a grab that never reached any
// record, but wrong for a GRAB that went to Kafka just before the flip and is not
// sunk yet: the sink would write the GRAB later, and the record would show a
// grant Redis has returned. Writing every CANCEL regardless would break the sum
// for true orphans instead. So while degraded a CANCEL item goes to MySQL only if
// its GRAB is there; otherwise it goes to Kafka, where it lands behind its GRAB
// (same requestId key, same partition) or, for a true orphan, is skipped by the
// sink. If Kafka is down too, Publish fails: the grab path then keeps the CANCEL
// owed in the ledger, and the reconciler retries it every pass until the sink has
// brought the GRAB into MySQL or Kafka takes it. Nothing is lost or doubled, at
// the price of owed CANCELs waiting for Kafka to come back.
//
// Not degraded, a batch of CANCELs Kafka refuses takes the same split: the items
// whose GRAB is in MySQL are written there at once, so the debt does not wait in
// Redis alone (a shard lost before the reconciler's next pass would lose it, and
// the rebuild would restore the grant); the rest stay owed. Should Kafka have taken
// the batch after all, the sink's copy is a duplicate the record skips.
//
// A CANCEL that goes neither to Kafka nor to the log (Kafka refused it and its GRAB
// is not in MySQL yet), degraded or not, stays owed in the ledger, and a copy is
// kept in the record's owed list (store.OweCancels): should the shard be lost before
// the reconciler pays it, the rebuild writes it into the log once its GRAB is there.
type DegradePublisher struct {
	kafka    Publisher
	log      FlowLog
	switches *configcenter.Holder
	routed   *prometheus.CounterVec
}

// NewDegradePublisher wraps the Kafka publisher; reg may be nil.
func NewDegradePublisher(kafka Publisher, log FlowLog, switches *configcenter.Holder, reg prometheus.Registerer) *DegradePublisher {
	p := &DegradePublisher{kafka: kafka, log: log, switches: switches,
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flashsale", Subsystem: "grab",
			Name: "flow_events_routed_total", Help: "Flow events committed, by route: kafka, mysql (degraded), kafka_behind_grab (a degraded CANCEL whose GRAB is not in MySQL yet), mysql_kafka_refused (a CANCEL Kafka refused whose GRAB is in MySQL), or mysql_owed (a CANCEL that could go to neither, copied to the owed list; still owed in Redis)."},
			[]string{"route"})}
	if reg != nil {
		reg.MustRegister(p.routed)
	}
	return p
}

// Publish implements Publisher.
func (p *DegradePublisher) Publish(ctx context.Context, events ...flow.Event) error {
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
func (p *DegradePublisher) recordCancels(ctx context.Context, events []flow.Event, kafkaErr error) error {
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
func (p *DegradePublisher) owe(ctx context.Context, cancels []flow.Event, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fallbackTimeout)
	defer cancel()
	if err := p.log.OweCancels(ctx, cancels); err != nil {
		return fmt.Errorf("%d CANCEL events wait for their GRAB, not in MySQL yet, and no copy was kept: %w", len(cancels), errors.Join(cause, err))
	}
	p.routed.WithLabelValues("mysql_owed").Add(float64(len(cancels)))
	return fmt.Errorf("%d CANCEL events wait for their GRAB, not in MySQL yet (a copy is kept in the record's owed list): %w", len(cancels), cause)
}

// logFlows writes events to the MySQL flow log and counts them under route.
func (p *DegradePublisher) logFlows(ctx context.Context, events []flow.Event, route string) error {
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
func (p *DegradePublisher) split(ctx context.Context, events []flow.Event) (toLog, behind []flow.Event, err error) {
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
