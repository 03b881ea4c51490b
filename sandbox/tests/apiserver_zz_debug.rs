#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn debug_server() {
    let s = quartet_sandbox::apiserver::ApiServer::start(Default::default())
        .await
        .unwrap();
    s.write_kubeconfig(std::path::Path::new("/tmp/dbg-kubeconfig"))
        .unwrap();
    eprintln!("URL {}", s.url());
    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
}
