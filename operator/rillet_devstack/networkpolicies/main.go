// Command networkpolicies enforces Kubernetes NetworkPolicies on one node of the local stack,
// with sigs.k8s.io/kube-network-policies (SIG Network's reference implementation: nftables
// sends the first packet of each connection to or from a pod that a policy selects to an
// nfqueue, and the controller's verdict is kept by conntrack).
//
// Upstream's command only runs in a pod (rest.InClusterConfig); the stack runs its node parts
// as host processes, as it does kube-proxy, so this wrapper takes a kubeconfig instead and is
// otherwise upstream's cmd/main.go without Admin Network Policies and with the DNS workaround
// off (kernels from 6.12 have the conntrack fix).
//
// Usage: networkpolicies -kubeconfig <file> -hostname-override <node> [-nfqueue-id N]
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig to watch pods, namespaces and policies with")
	nodeName := flag.String("hostname-override", "", "the name of the node whose pods this process guards")
	queueID := flag.Int("nfqueue-id", 100, "the nfqueue the first packets are sent to")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		klog.Error("-kubeconfig and -hostname-override are required")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer cancel()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("reading %s: %v", *kubeconfig, err)
	}
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("a client for %s: %v", config.Host, err)
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)
	controller, err := networkpolicy.NewController(
		clientset,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:  *queueID,
			NodeName: *nodeName,
			// NRI stays on, as upstream's command leaves it (its -disable-nri flag is never
			// read): with it off, v0.8.0 dereferences the missing plugin for any address that
			// is no pod's, and panics. The stack's containerd (1.6) has no NRI socket, so the
			// plugin learns nothing and pod IPs come from the apiserver.
			// Kernels from 6.12 on have the conntrack fix this works around.
			NetfilterBug1766Fix: false,
		},
	)
	if err != nil {
		klog.Fatalf("the network policy controller: %v", err)
	}
	factory.Start(ctx.Done())
	// Run removes its nftables table when the context ends.
	if err := controller.Run(ctx); err != nil {
		klog.Errorf("the network policy controller stopped: %v", err)
		os.Exit(1)
	}
}
