// Drives the official RocketMQ Go client (github.com/apache/rocketmq-client-go/v2) for test_go_client.py.
//
//	go_driver produce NAMESRV TOPIC GROUP COUNT TAGS MODE
//	    Sends COUNT messages (body "go-<i>-<tag>", keys "gkey-<i>" and "gshared"), cycling through the
//	    comma-separated TAGS. MODE: sync, async, oneway, batch (one SendSync of COUNT messages), orderly (a
//	    hash queue selector on sharding key "order-<i%2>"), delay (delay level 1), trace (sync, with the
//	    client's message trace on). Prints one JSON line per result (none for oneway).
//	go_driver transaction NAMESRV TOPIC GROUP
//	    Three half messages: the local transaction commits "tx-commit", rolls back "tx-rollback" and answers
//	    UNKNOWN for "tx-check", which the broker's check then commits. Prints each send result, waits for
//	    the check and prints {"checked": [...]}.
//	go_driver admin NAMESRV TOPIC BROKER_ADDR
//	    The admin API: creates TOPIC (4 read and 4 write queues) on BROKER_ADDR, then prints the publish
//	    queues the name server gives for it, whether the topic list holds it and the subscription groups of
//	    the broker ({"step": ...} lines), deletes it and prints whether the topic list still holds it.
//	go_driver pull NAMESRV TOPIC GROUP EXPRESSION QUEUES MAX
//	    A pull consumer reads queues 0..QUEUES-1 of TOPIC from offset 0 with PullFrom, MAX messages per pull,
//	    until a pull finds nothing new; prints {"pull": ...} per pull and {"received": [...]}.
//	go_driver consume NAMESRV TOPIC GROUP EXPRESSION COUNT SECONDS MODE
//	    Prints {"started": true} once the push consumer runs, then {"message": ...} per delivery. MODE: tag,
//	    sql (EXPRESSION is SQL92), retry (each message is answered ConsumeRetryLater on its first delivery),
//	    orderly (an orderly listener), broadcast (broadcasting model), trace (the client's consume trace
//	    on). After COUNT deliveries it waits two more seconds for extras, prints {"received": [...]} and
//	    exits 0; after SECONDS without COUNT it prints the same and exits 2.
//
// Credentials come from MQ_ACCESS_KEY / MQ_SECRET_KEY when set; MQ_GO_LOG_LEVEL sets the client's log level
// (default warn).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var outMu sync.Mutex

func emit(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(5, "encode: %v", err)
	}
	outMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	outMu.Unlock()
}

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}

func credentials() (primitive.Credentials, bool) {
	ak, sk := os.Getenv("MQ_ACCESS_KEY"), os.Getenv("MQ_SECRET_KEY")
	return primitive.Credentials{AccessKey: ak, SecretKey: sk}, ak != ""
}

// traceConfig: the client's message trace to RMQ_SYS_TRACE_TOPIC, signed like the client.
func traceConfig(ns string) *primitive.TraceConfig {
	tc := &primitive.TraceConfig{Access: primitive.Local, Resolver: resolver(ns)}
	if c, ok := credentials(); ok {
		tc.Credentials = c
	}
	return tc
}

func resolver(ns string) primitive.NsResolver {
	return primitive.NewPassthroughResolver(strings.Split(ns, ";"))
}

// The Java client's names, so both drivers print the same.
var sendStatusNames = map[primitive.SendStatus]string{primitive.SendOK: "SEND_OK",
	primitive.SendFlushDiskTimeout: "FLUSH_DISK_TIMEOUT", primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE", primitive.SendUnknownError: "UNKNOWN_ERROR"}

var transactionStateNames = map[primitive.LocalTransactionState]string{
	primitive.CommitMessageState: "COMMIT_MESSAGE", primitive.RollbackMessageState: "ROLLBACK_MESSAGE",
	primitive.UnknowState: "UNKNOW"}

func resultJSON(i int, tag string, r *primitive.SendResult) map[string]interface{} {
	out := map[string]interface{}{"i": i, "tag": tag, "status": sendStatusNames[r.Status], "msgId": r.MsgID,
		"offsetMsgId": r.OffsetMsgID, "queueOffset": r.QueueOffset, "regionId": r.RegionID,
		"traceOn": r.TraceOn, "transactionId": r.TransactionID}
	if r.MessageQueue != nil {
		out["queueId"] = r.MessageQueue.QueueId
		out["broker"] = r.MessageQueue.BrokerName
	}
	return out
}

func message(topic string, i int, tag string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(fmt.Sprintf("go-%d-%s", i, tag)))
	m.WithTag(tag)
	m.WithKeys([]string{fmt.Sprintf("gkey-%d", i), "gshared"})
	return m
}

func produce(ns, topic, group string, count int, tags []string, mode string) {
	opts := []producer.Option{producer.WithNsResolver(resolver(ns)), producer.WithGroupName(group),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5 * time.Second)}
	if c, ok := credentials(); ok {
		opts = append(opts, producer.WithCredentials(c))
	}
	if mode == "orderly" {
		opts = append(opts, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	}
	if mode == "trace" {
		opts = append(opts, producer.WithTrace(traceConfig(ns)))
	}
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		fail(3, "new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		fail(3, "start producer: %v", err)
	}
	ctx := context.Background()
	tag := func(i int) string { return tags[i%len(tags)] }
	switch mode {
	case "batch":
		msgs := make([]*primitive.Message, count)
		for i := range msgs {
			msgs[i] = message(topic, i, tag(i))
		}
		r, err := p.SendSync(ctx, msgs...)
		if err != nil {
			fail(3, "batch send: %v", err)
		}
		emit(resultJSON(0, "", r))
	case "async":
		var wg sync.WaitGroup
		errs := make(chan error, count)
		for i := 0; i < count; i++ {
			wg.Add(1)
			i := i
			err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, e error) {
				defer wg.Done()
				if e != nil {
					errs <- e
					return
				}
				emit(resultJSON(i, tag(i), r))
			}, message(topic, i, tag(i)))
			if err != nil {
				fail(3, "async send %d: %v", i, err)
			}
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			fail(3, "async send: %v", e)
		}
	case "oneway":
		for i := 0; i < count; i++ {
			if err := p.SendOneWay(ctx, message(topic, i, tag(i))); err != nil {
				fail(3, "oneway send %d: %v", i, err)
			}
		}
	default:
		for i := 0; i < count; i++ {
			m := message(topic, i, tag(i))
			switch mode {
			case "orderly":
				m.WithShardingKey(fmt.Sprintf("order-%d", i%2))
			case "delay":
				m.WithDelayTimeLevel(1)
			}
			r, err := p.SendSync(ctx, m)
			if err != nil {
				fail(3, "send %d: %v", i, err)
			}
			emit(resultJSON(i, tag(i), r))
		}
	}
	if mode == "trace" {
		time.Sleep(2 * time.Second) // the trace dispatcher sends its batch in the background
	}
	if err := p.Shutdown(); err != nil {
		fail(3, "shutdown producer: %v", err)
	}
}

type txListener struct {
	mu      sync.Mutex
	checked []string
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "tx-commit":
		return primitive.CommitMessageState
	case "tx-rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked = append(l.checked, string(m.Body))
	l.mu.Unlock()
	return primitive.CommitMessageState
}

func transaction(ns, topic, group string) {
	l := &txListener{}
	opts := []producer.Option{producer.WithNsResolver(resolver(ns)), producer.WithGroupName(group),
		producer.WithRetry(1)}
	if c, ok := credentials(); ok {
		opts = append(opts, producer.WithCredentials(c))
	}
	p, err := rocketmq.NewTransactionProducer(l, opts...)
	if err != nil {
		fail(3, "new transaction producer: %v", err)
	}
	if err := p.Start(); err != nil {
		fail(3, "start transaction producer: %v", err)
	}
	for i, body := range []string{"tx-commit", "tx-rollback", "tx-check"} {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag("TagTx")
		m.WithKeys([]string{body})
		r, err := p.SendMessageInTransaction(context.Background(), m)
		if err != nil {
			fail(3, "transaction send %s: %v", body, err)
		}
		out := resultJSON(i, "TagTx", r.SendResult)
		out["state"] = transactionStateNames[r.State]
		emit(out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		n := len(l.checked)
		l.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let the commit of the check reach the broker
	l.mu.Lock()
	emit(map[string]interface{}{"checked": l.checked})
	l.mu.Unlock()
	if err := p.Shutdown(); err != nil {
		fail(3, "shutdown transaction producer: %v", err)
	}
}

func topicListed(ctx context.Context, a admin.Admin, topic string) bool {
	list, err := a.FetchAllTopicList(ctx)
	if err != nil {
		fail(3, "topic list: %v", err)
	}
	for _, t := range list.TopicList {
		if t == topic {
			return true
		}
	}
	return false
}

func adminSteps(ns, topic, brokerAddr string) {
	opts := []admin.AdminOption{admin.WithResolver(resolver(ns))}
	if c, ok := credentials(); ok {
		opts = append(opts, admin.WithCredentials(c))
	}
	a, err := admin.NewAdmin(opts...)
	if err != nil {
		fail(3, "new admin: %v", err)
	}
	ctx := context.Background()
	err = a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4))
	if err != nil {
		fail(3, "create topic: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // the broker registers the new topic with the name server
	queues, err := a.FetchPublishMessageQueues(ctx, topic)
	if err != nil {
		fail(3, "publish queues: %v", err)
	}
	ids := []int{}
	for _, q := range queues {
		ids = append(ids, q.QueueId)
	}
	emit(map[string]interface{}{"step": "created", "queueIds": ids, "listed": topicListed(ctx, a, topic)})
	groups, err := a.GetAllSubscriptionGroup(ctx, brokerAddr, 3*time.Second)
	if err != nil {
		fail(3, "subscription groups: %v", err)
	}
	names := []string{}
	for name := range groups.SubscriptionGroupTable {
		names = append(names, name)
	}
	emit(map[string]interface{}{"step": "groups", "groups": names})
	if err := a.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(brokerAddr)); err != nil {
		fail(3, "delete topic: %v", err)
	}
	emit(map[string]interface{}{"step": "deleted", "listed": topicListed(ctx, a, topic)})
	if err := a.Close(); err != nil {
		fail(3, "close admin: %v", err)
	}
}

func pull(ns, topic, group, expression string, queues, max int) {
	opts := []consumer.Option{consumer.WithNsResolver(resolver(ns)), consumer.WithGroupName(group)}
	if c, ok := credentials(); ok {
		opts = append(opts, consumer.WithCredentials(c))
	}
	c, err := rocketmq.NewPullConsumer(opts...)
	if err != nil {
		fail(4, "new pull consumer: %v", err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expression}); err != nil {
		fail(4, "subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		fail(4, "start pull consumer: %v", err)
	}
	received := []map[string]interface{}{}
	ctx := context.Background()
	for q := 0; q < queues; q++ {
		mq := &primitive.MessageQueue{Topic: topic, BrokerName: "broker-a", QueueId: q}
		offset := int64(0)
		for {
			r, err := c.PullFrom(ctx, mq, offset, max)
			if err != nil {
				fail(4, "pull queue %d offset %d: %v", q, offset, err)
			}
			msgs := r.GetMessageExts()
			emit(map[string]interface{}{"pull": map[string]interface{}{"queueId": q, "offset": offset,
				"status": int(r.Status), "next": r.NextBeginOffset, "min": r.MinOffset, "max": r.MaxOffset,
				"found": len(msgs)}})
			for _, m := range msgs {
				received = append(received, map[string]interface{}{"body": string(m.Body), "tags": m.GetTags(),
					"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset, "msgId": m.MsgId})
			}
			if r.Status != primitive.PullFound || r.NextBeginOffset <= offset {
				break
			}
			offset = r.NextBeginOffset
		}
	}
	emit(map[string]interface{}{"received": received})
	if err := c.Shutdown(); err != nil {
		fail(3, "shutdown pull consumer: %v", err)
	}
}

func consume(ns, topic, group, expression string, count int, seconds float64, mode string) {
	opts := []consumer.Option{consumer.WithNsResolver(resolver(ns)), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset)}
	if c, ok := credentials(); ok {
		opts = append(opts, consumer.WithCredentials(c))
	}
	if mode == "orderly" {
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	if mode == "broadcast" {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	}
	if mode == "trace" {
		opts = append(opts, consumer.WithTrace(traceConfig(ns)))
	}
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		fail(4, "new consumer: %v", err)
	}
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: expression}
	if mode == "sql" {
		selector.Type = consumer.SQL92
	}
	var mu sync.Mutex
	received := []map[string]interface{}{}
	done := make(chan int, 1)
	finish := func(code int) {
		select {
		case done <- code:
		default:
		}
	}
	err = c.Subscribe(topic, selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			if mode == "retry" && m.ReconsumeTimes == 0 {
				emit(map[string]interface{}{"retryLater": m.MsgId})
				return consumer.ConsumeRetryLater, nil
			}
		}
		for _, m := range msgs {
			rec := map[string]interface{}{"msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId, "topic": m.Topic,
				"tags": m.GetTags(), "keys": m.GetKeys(), "body": string(m.Body), "queueId": m.Queue.QueueId,
				"queueOffset": m.QueueOffset, "reconsumeTimes": m.ReconsumeTimes, "storeHost": m.StoreHost,
				"bornHost": m.BornHost, "properties": m.GetProperties()}
			emit(map[string]interface{}{"message": rec})
			mu.Lock()
			received = append(received, rec)
			n := len(received)
			mu.Unlock()
			if n == count {
				go func() { time.Sleep(2 * time.Second); finish(0) }()
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		fail(4, "subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		fail(4, "start consumer: %v", err)
	}
	emit(map[string]interface{}{"started": true})
	go func() { time.Sleep(time.Duration(seconds * float64(time.Second))); finish(2) }()
	code := <-done
	mu.Lock()
	emit(map[string]interface{}{"received": received})
	mu.Unlock()
	if err := c.Shutdown(); err != nil {
		fail(3, "shutdown consumer: %v", err)
	}
	os.Exit(code)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(64, "not a number: %q", s)
	}
	return n
}

func main() {
	level := os.Getenv("MQ_GO_LOG_LEVEL")
	if level == "" {
		level = "warn"
	}
	rlog.SetLogLevel(level)
	a := os.Args[1:]
	if len(a) < 4 {
		fail(64, "usage: go_driver produce|transaction|admin|pull|consume NAMESRV TOPIC ...")
	}
	switch a[0] {
	case "produce":
		if len(a) != 7 {
			fail(64, "usage: go_driver produce NAMESRV TOPIC GROUP COUNT TAGS MODE")
		}
		produce(a[1], a[2], a[3], atoi(a[4]), strings.Split(a[5], ","), a[6])
	case "transaction":
		transaction(a[1], a[2], a[3])
	case "admin":
		adminSteps(a[1], a[2], a[3])
	case "pull":
		if len(a) != 7 {
			fail(64, "usage: go_driver pull NAMESRV TOPIC GROUP EXPRESSION QUEUES MAX")
		}
		pull(a[1], a[2], a[3], a[4], atoi(a[5]), atoi(a[6]))
	case "consume":
		if len(a) != 8 {
			fail(64, "usage: go_driver consume NAMESRV TOPIC GROUP EXPRESSION COUNT SECONDS MODE")
		}
		secs, err := strconv.ParseFloat(a[6], 64)
		if err != nil {
			fail(64, "not a number: %q", a[6])
		}
		consume(a[1], a[2], a[3], a[4], atoi(a[5]), secs, a[7])
	default:
		fail(64, "unknown mode %s", a[0])
	}
}
