//! Frame splitting: complete, partial, invalid sizes.

use bytes::{BufMut, BytesMut};
use net::{decode_frame, FrameStatus, NetError, SOCKET_REQUEST_MAX_BYTES_DEFAULT};

#[test]
fn splits_frames_without_copying() {
    let mut buf = BytesMut::new();
    buf.put_i32(3);
    buf.put_slice(b"abc");
    buf.put_i32(2);
    buf.put_slice(b"de");
    buf.put_slice(&[0, 0]); // Half of the next prefix.
    let base = buf.as_ptr() as usize;

    let FrameStatus::Frame(first) = decode_frame(&mut buf, 100).unwrap() else {
        panic!("expected a frame");
    };
    assert_eq!(&first[..], b"abc");
    assert_eq!(
        first.as_ptr() as usize,
        base + 4,
        "frame must share the read buffer"
    );
    let FrameStatus::Frame(second) = decode_frame(&mut buf, 100).unwrap() else {
        panic!("expected a frame");
    };
    assert_eq!(&second[..], b"de");
    assert_eq!(
        decode_frame(&mut buf, 100).unwrap(),
        FrameStatus::NeedBytes(2)
    );
    assert_eq!(
        buf.len(),
        2,
        "an incomplete frame leaves the buffer untouched"
    );
}

#[test]
fn need_bytes_is_exact_once_prefix_is_read() {
    let mut buf = BytesMut::new();
    assert_eq!(
        decode_frame(&mut buf, 100).unwrap(),
        FrameStatus::NeedBytes(4)
    );
    buf.put_i32(10);
    assert_eq!(
        decode_frame(&mut buf, 100).unwrap(),
        FrameStatus::NeedBytes(10)
    );
    buf.put_slice(&[1; 9]);
    assert_eq!(
        decode_frame(&mut buf, 100).unwrap(),
        FrameStatus::NeedBytes(1)
    );
    buf.put_u8(1);
    assert!(matches!(decode_frame(&mut buf, 100).unwrap(), FrameStatus::Frame(f) if f.len() == 10));
    assert!(buf.is_empty());
}

#[test]
fn size_zero_is_an_error() {
    let mut buf = BytesMut::from(&[0u8, 0, 0, 0, 1, 2][..]);
    assert!(matches!(
        decode_frame(&mut buf, 100),
        Err(NetError::FrameSizeZero)
    ));
}

#[test]
fn negative_size_is_an_error() {
    let mut buf = BytesMut::from(&[0xff_u8, 0xff, 0xff, 0xfe][..]);
    assert!(matches!(
        decode_frame(&mut buf, 100),
        Err(NetError::FrameSizeNegative { size: -2 })
    ));
}

#[test]
fn size_0x7fffffff_is_too_large_for_the_default_limit() {
    let mut buf = BytesMut::from(&[0x7f_u8, 0xff, 0xff, 0xff, 0, 1][..]);
    let err = decode_frame(&mut buf, SOCKET_REQUEST_MAX_BYTES_DEFAULT).unwrap_err();
    assert!(matches!(
        err,
        NetError::FrameTooLarge {
            size: 0x7fff_ffff,
            socket_request_max_bytes: SOCKET_REQUEST_MAX_BYTES_DEFAULT
        }
    ));
    assert!(err.to_string().contains("socket.request.max.bytes"));
}

#[test]
fn size_0x7fffffff_without_limit_only_asks_for_bytes() {
    // No allocation happens for a claimed size: the caller decides whether to reserve.
    let mut buf = BytesMut::from(&[0x7f_u8, 0xff, 0xff, 0xff, 0, 1][..]);
    assert_eq!(
        decode_frame(&mut buf, usize::MAX).unwrap(),
        FrameStatus::NeedBytes(0x7fff_ffff - 2)
    );
}

#[test]
fn limit_is_inclusive() {
    let mut buf = BytesMut::new();
    buf.put_i32(8);
    buf.put_slice(&[0; 8]);
    assert!(matches!(
        decode_frame(&mut buf.clone(), 8),
        Ok(FrameStatus::Frame(_))
    ));
    assert!(matches!(
        decode_frame(&mut buf, 7),
        Err(NetError::FrameTooLarge { size: 8, .. })
    ));
}
